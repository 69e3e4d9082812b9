"""The user's files: read only regular ones, never more than a limit; write whole or not at all.

Reading (`read_bounded`): a path must name a regular file (a FIFO would block the open forever,
`/dev/zero` never ends, a socket cannot be read): it is stat-ed first and opened with O_NONBLOCK,
and the open file is checked again, so nothing blocks. The bytes, gunzipped when they start with
gzip's magic number, may not exceed `max_bytes`; decompression stops as soon as the output
passes the limit, so a gzip bomb is refused while it is read, not after it filled the memory.
The default limit is half the memory available now (`default_max_bytes`): the decoded text
and what is parsed from it must both fit.

Writing (`atomic_path`, `write_atomic`): the data goes to a temporary file in the target's own
folder, is fsynced, then renamed over the target, so a full disk or a kill leaves the old file
or none, never a truncated one. The target must not be one of the command's inputs (nor inside
an input directory), and an existing file is replaced only when asked (`force`, --force).
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
import zlib
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import BinaryIO

from profiler.model.errors import InputError

MiB = 2**20
GZIP_MAGIC = b"\x1f\x8b"
_BLOCK = 4 * MiB  # decompressed bytes inspected per step of check_expanded
_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


class TooLarge(InputError):
    """The data (once decompressed) is larger than the reading limit."""


def default_max_bytes() -> int:
    """Half the memory available now: MemAvailable in /proc/meminfo (Linux), else half of the
    free physical pages (os.sysconf), else 8 GiB. A trace's text and its parsed tables together
    take about twice the text, so a larger text would not fit."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024 // 2  # the figure is in kB (KiB)
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2
    except (ValueError, OSError, AttributeError):
        return 16 * 2**30 // 2


def parse_size(text: str) -> int:
    """'512M', '2G', '1.5GiB', '100MB', '4096' -> bytes (K/M/G/T are powers of 1024)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", str(text), re.IGNORECASE)
    if not m:
        raise ValueError(f"{text!r} is not a size (examples: 4096, 512M, 2G)")
    n = int(float(m[1]) * 1024 ** "_kmgt".index(m[2].lower() or "_"))
    if n <= 0:
        raise ValueError(f"{text!r}: the limit must be positive")
    return n


def describe_size(n: int) -> str:
    return f"{n / MiB:,.1f} MiB" if n >= MiB else f"{n:,} bytes"


def check_regular(path: str | Path) -> os.stat_result:
    """The stat of `path` if it is a regular file; otherwise an InputError saying what it is."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise InputError(path, "no such file or directory") from None
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None
    _refuse_special(path, st.st_mode)
    return st


def _refuse_special(path: str | Path, mode: int) -> None:
    for test, what in _KINDS:
        if test(mode):
            raise InputError(path, f"is {what}, not a regular file; only files (and directories of them) are read")
    if not stat.S_ISREG(mode):
        raise InputError(path, "not a regular file")


def open_regular(path: str | Path) -> BinaryIO:
    """Open a regular file for reading without ever blocking (O_NONBLOCK: a FIFO swapped in
    after the stat opens at once, and is refused by the fstat of what was opened)."""
    check_regular(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise InputError(path, f"cannot read: {e.strerror or e}") from None
    try:
        _refuse_special(path, os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_bounded(
    source: str | Path | BinaryIO, max_bytes: int | None = None, *, name: str | Path | None = None, gunzip: bool = True
) -> bytes:
    """The bytes of `source` (a path to a regular file, or a binary file object such as an
    upload), gunzipped when they start with gzip's magic number (and `gunzip`).

    Raises `TooLarge` (an InputError) as soon as the file or its decompressed content passes
    `max_bytes` (default: `default_max_bytes()`), InputError for a missing, special or unreadable
    file, an empty or corrupt one, or memory running out while reading. `name` is the name
    the messages use (default: the path)."""
    limit = default_max_bytes() if max_bytes is None else max_bytes
    if isinstance(source, (str, Path)):
        name = source if name is None else name
        with open_regular(source) as f:
            size = os.fstat(f.fileno()).st_size
            if size > limit:
                raise TooLarge(
                    name,
                    f"the file is {describe_size(size)}, over the reading limit of {describe_size(limit)}"
                    " (--max-bytes raises it)",
                )
            data = _read(f, name, limit, size)
    else:
        name = name if name is not None else getattr(source, "name", "upload")
        data = _read(source, name, limit)
    if not data:
        raise InputError(name, "empty file (0 bytes)")
    if gunzip and data[:2] == GZIP_MAGIC:
        data = gunzip_bounded(data, limit, name)
    return data


def _read(f: BinaryIO, name: str | Path, limit: int, expected: int | None = None) -> bytes:
    """At most `limit` bytes of `f`, TooLarge past it. `expected`: the file's size from fstat,
    read in one call (a read of limit + 1 would reserve the whole limit, gigabytes, up front);
    a file that grew since, or a stream of unknown size, is read on in 16 MiB pieces."""
    parts: list[bytes] = []
    total = 0
    want = (expected + 1) if expected is not None else 16 << 20  # one byte more tells growth / EOF
    try:
        while True:
            part = f.read(min(want, limit + 1 - total))
            if not part:
                break
            parts.append(part)
            total += len(part)
            if total > limit:
                raise TooLarge(name, f"over the reading limit of {describe_size(limit)} (--max-bytes raises it)")
            want = 16 << 20
    except MemoryError:
        raise InputError(name, "out of memory while reading the file") from None
    except OSError as e:
        raise InputError(name, f"cannot read: {e.strerror or e}") from None
    return parts[0] if len(parts) == 1 else b"".join(parts)


def gunzip_bounded(data: bytes, max_bytes: int, name: str | Path | None = None) -> bytes:
    """Every gzip member of `data`, CRCs checked, at most `max_bytes` of output in all (TooLarge
    past it: inflating stops there). ISA-L inflates 2.5x faster than zlib."""
    from isal import isal_zlib

    out: list[bytes] = []
    total = 0
    try:
        while data:
            d = isal_zlib.decompressobj(wbits=31)
            part = d.decompress(data, max_bytes - total + 1)  # max_length: never more than one byte past the limit
            total += len(part)
            if total > max_bytes:
                raise TooLarge(
                    name,
                    f"decompresses to more than the reading limit of {describe_size(max_bytes)}"
                    " (--max-bytes raises it)",
                )
            out.append(part)
            if not d.eof:
                raise InputError(
                    name, "corrupt gzip data (truncated: the file ended before the end of the gzip stream)"
                )
            data = d.unused_data.lstrip(b"\x00")  # members may follow, padding may too
    except InputError:
        raise
    except MemoryError:
        raise InputError(
            name,
            f"out of memory while decompressing (after {describe_size(total)}); "
            "a lower --max-bytes refuses such a file sooner",
        ) from None
    except Exception as e:  # noqa: BLE001 - isal raises its own IsalError (not zlib.error) for bad streams
        raise InputError(name, f"corrupt gzip data ({e or type(e).__name__})") from None
    return out[0] if len(out) == 1 else b"".join(out)


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def check_writable(path: str | Path, *, force: bool = False, inputs: Iterable[str | Path] = ()) -> Path:
    """`path` if writing it loses nothing the user gave: it is not one of `inputs` (nor inside an
    input directory: the directory would read back with the new file in it), and it does not
    exist unless `force`. InputError otherwise."""
    path = Path(path)
    target = Path(os.path.abspath(path))
    for given in inputs:
        src = Path(os.path.abspath(given))
        same = target == src or (path.exists() and Path(given).exists() and os.path.samefile(path, given))
        if same:
            raise InputError(path, "is an input of this command; write the output to another file")
        if src.is_dir() and (target.parent == src or src in target.parents or _same_dir(target.parent, src)):
            raise InputError(path, f"is inside the input directory {given}; write the output elsewhere")
    if os.path.lexists(path):
        if os.path.isdir(path):
            raise InputError(path, "is a directory")
        if not force:
            raise InputError(path, "already exists; pass --force to overwrite it")
    return path


def _same_dir(a: Path, b: Path) -> bool:
    with suppress(OSError):
        return os.path.samefile(a, b)
    return False


@contextmanager
def atomic_path(path: str | Path, *, force: bool = False, inputs: Iterable[str | Path] = ()) -> Iterator[Path]:
    """A temporary path in `path`'s folder to write to (same name ending, so writers that pick
    gzip by the name still do); on a clean exit it is fsynced and renamed to `path`, on an
    error it is removed and `path` is left as it was. Checks `check_writable` first."""
    path = check_writable(path, force=force, inputs=inputs)
    folder = path.parent
    if not folder.is_dir():
        raise InputError(path, "the output directory does not exist")
    try:
        fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=f".tmp{_ending(path.name)}")
    except OSError as e:
        raise InputError(path, f"cannot write: {e.strerror or e}") from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        _commit(tmp, path, force)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise InputError(path, f"cannot write: {e.strerror or e}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: str | Path, data: bytes, *, force: bool = False, inputs: Iterable[str | Path] = ()) -> Path:
    """Write `data` to `path` whole or not at all (see `atomic_path`)."""
    with atomic_path(path, force=force, inputs=inputs) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def _ending(name: str) -> str:
    """'t.json.gz' -> '.json.gz': the suffixes a writer may look at."""
    return "".join(Path(name).suffixes[-2:])


def _commit(tmp: Path, path: Path, force: bool) -> None:
    with open(tmp, "rb+") as f:
        os.fchmod(f.fileno(), _mode_for(path))
        os.fsync(f.fileno())
    if force:
        os.replace(tmp, path)
    else:  # link fails if `path` appeared meanwhile: never replace a file the user did not give up
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise InputError(path, "already exists; pass --force to overwrite it") from None
        except OSError:  # a filesystem without hard links
            if os.path.lexists(path):
                raise InputError(path, "already exists; pass --force to overwrite it") from None
            os.replace(tmp, path)
        else:
            tmp.unlink()
    with suppress(OSError):  # the rename itself survives a crash once the folder is synced
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _mode_for(path: Path) -> int:
    """The mode the file would get from a plain open(): the old file's, else 0o666 less the umask."""
    with suppress(OSError):
        return stat.S_IMODE(os.stat(path).st_mode)
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def check_expanded(raw: bytes, limit: int, label: str) -> None:
    """Refuse gzip data that decompresses to more than `limit` bytes, counted while
    decompressing a block at a time with nothing kept: a bomb costs CPU up to the limit, never
    memory (the dashboard's upload check, before it stores the bytes)."""
    data, d, total = raw, zlib.decompressobj(wbits=31), 0
    try:
        while True:
            out = d.decompress(data, _BLOCK)
            total += len(out)
            if total > limit:
                raise InputError(label, f"decompresses to more than {limit / MiB:,.0f} MiB, the limit for an upload")
            data = d.unconsumed_tail
            if d.eof:  # a gzip file may hold several members
                data = d.unused_data
                if data[:2] != GZIP_MAGIC:
                    return
                d = zlib.decompressobj(wbits=31)
            elif not out and not data:
                raise InputError(label, "the gzip data is cut short")
    except zlib.error as e:
        raise InputError(label, f"not valid gzip data ({e})") from None
