"""The columnar cache: the first load of a trace stores its tables as Parquet
(profiler.model.trace_parquet); later loads of the same bytes by the same code read them back
instead of parsing the JSON again.

Key: BLAKE2b-128 over the cache format, the tool version, a digest of the code that builds the
tables (collectors/ and profiler/model/: a changed reader is a different tool even when the
version string is not bumped) and every input file's relative name, size and whole content.
Content, not size+mtime: a copy made with `cp -p` or `rsync -t` keeps both while the bytes
differ. BLAKE2b reads ~1 GB/s, a few percent of a parse (3 ms for ddp_allreduce_v100's 2.9 MB
gzip against a 1 s parse) but seconds for a GiB, so the key found for a path is remembered with
the files' (device, inode, size, mtime, ctime) and reused while they are unchanged
(`content_key`): ctime changes on every write and cannot be set back.

Where: $PERF_CACHE_DIR, else $XDG_CACHE_HOME/perf-suite, else ~/.cache/perf-suite (mode 0700),
never beside the user's files. `--no-cache` or PERF_NO_CACHE=1 turns it off.

Safety: an entry is written in a temporary folder and renamed into place, so a killed process
leaves no half entry; `manifest.json`, written last, holds the BLAKE2b of every file, checked on
every read: a truncated or altered file (or one missing) is removed and the trace parsed and
stored again. The tables are those load_trace returns, redacted by the collector
(profiler.model.redact_trace), so no secret the output would hide lands in the cache.
A cache hit does not re-read the source, so --max-bytes (a bound on parsing) does not apply.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from profiler import __version__
from profiler.model.trace import Trace
from profiler.model.trace_parquet import FILES, FORMAT, NotStorable, from_files, to_files

MANIFEST = "manifest.json"
RACY_S = 2  # a file changed less than this long ago is hashed every time (content_key)
MAX_FILES = 10_000  # a directory with more is not hashed (nor cached)
STALE_TMP_S = 3600  # a temporary folder older than this was left by a killed process
#: The cache's size cap (PERF_CACHE_MAX, bytes); least recently read entries go first.
DEFAULT_MAX_BYTES = 8 << 30


def cache_dir() -> Path | None:
    """The cache's folder, or None when it is off (PERF_NO_CACHE set to anything but '' or '0')."""
    if os.environ.get("PERF_NO_CACHE", "") not in ("", "0"):
        return None
    env = os.environ.get("PERF_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "perf-suite"


def cached_load(path: str | Path, load: Callable[[], Trace]) -> Trace:
    """`load()`, or the tables a previous load of the same bytes stored (see the module docstring).
    Anything the cache cannot do (an unwritable folder, a special file, a trace JSON cannot
    hold) falls back to `load()`, silently: the cache never changes a result."""
    root = cache_dir()
    files = _sources(Path(path)) if root is not None else None
    if root is None or files is None:
        return load()
    before = _stamp(files)
    key = content_key(root, Path(path), files)
    entry = root / "traces" / key
    trace = read_entry(entry)
    if trace is not None:
        return trace
    trace = load()
    if _stamp(files) == before:  # changed while parsing: the tables may not be the hashed bytes
        write_entry(entry, trace)
    return trace


def read_entry(entry: Path) -> Trace | None:
    """The Trace stored in `entry`, or None when it is absent; a corrupt entry is removed."""
    try:
        manifest = json.loads((entry / MANIFEST).read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        _remove(entry)
        return None
    try:
        files = {}
        for name in FILES:
            data = (entry / name).read_bytes()
            if _digest(data) != manifest["files"][name]:
                raise ValueError(f"{name}: digest differs")
            files[name] = data
        trace = from_files(files)
    except Exception:  # noqa: BLE001 - any damage reads as a miss: parse again
        _remove(entry)
        return None
    try:
        os.utime(entry / MANIFEST)  # last read, for pruning
    except OSError:
        pass
    return trace


def write_entry(entry: Path, trace: Trace) -> bool:
    """Store `trace` in `entry` atomically (temporary folder, then rename); False when it was not
    stored (not storable exactly, or the folder not writable)."""
    try:
        files = to_files(trace)
    except NotStorable:
        return False
    tmp = entry.parent / f".tmp-{entry.name}-{os.getpid()}-{time.monotonic_ns()}"
    try:
        entry.parent.mkdir(parents=True, exist_ok=True, mode=0o700)  # traces/: only the user reads it
        tmp.mkdir(mode=0o700)
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        manifest = {"format": FORMAT, "version": __version__, "files": {n: _digest(d) for n, d in files.items()}}
        (tmp / MANIFEST).write_text(json.dumps(manifest))
        if entry.exists():  # a corrupt entry read_entry could not remove, or a concurrent writer
            _remove(entry)
        os.rename(tmp, entry)
    except OSError:
        _remove(tmp)
        return False
    _prune(entry.parent, keep=entry)
    return True


def _sources(path: Path) -> list[Path] | None:
    """The regular files `path` names (itself, or those under it), or None: not cacheable."""
    try:
        if path.is_file():
            return [path]
        if not path.is_dir():
            return None  # missing or special: the loader says what is wrong
        out = []
        for dirpath, _dirs, names in os.walk(path):
            out += [Path(dirpath) / n for n in names if (Path(dirpath) / n).is_file()]
            if len(out) > MAX_FILES:
                return None
        return sorted(out)
    except OSError:
        return None


def _stamp(files: list[Path]) -> list[tuple[int, int, int, int, int]] | None:
    """(device, inode, size, mtime_ns, ctime_ns) of each file: what any write changes (ctime
    cannot be set back by `touch`, mtime can)."""
    try:
        return [(s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns) for s in map(os.stat, files)]
    except OSError:
        return None


def content_key(root: Path, path: Path, files: list[Path]) -> str:
    """`_key`, but not hashed again while the files' stamps are those recorded when it was
    (index/<hash of the tool, code and absolute path>.json). A stamp is recorded only when every
    file is older than RACY_S: a write within the filesystem's timestamp tick after the hash
    could otherwise keep the stamp (git's "racily clean" rule)."""
    stamp = _stamp(files)
    name = hashlib.blake2b(
        f"{FORMAT} {__version__} {_code_digest()} {path.resolve()}".encode("utf-8", "surrogateescape"),
        digest_size=16,
    ).hexdigest()
    index = root / "index" / f"{name}.json"
    try:
        known = json.loads(index.read_text())
        if stamp is not None and [list(s) for s in stamp] == known["stamp"]:
            return str(known["key"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    key = _key(path, files)
    if stamp is not None and all(time.time_ns() - s[4] > RACY_S * 1e9 for s in stamp):
        tmp = index.with_name(f".tmp-{index.name}-{os.getpid()}")
        try:
            index.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            tmp.write_text(json.dumps({"stamp": stamp, "key": key}))
            os.replace(tmp, index)
        except OSError:
            tmp.unlink(missing_ok=True)
    return key


def _key(path: Path, files: list[Path]) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(f"perf-suite trace cache {FORMAT} {__version__} {_code_digest()}\n".encode())
    for f in files:
        name = f.relative_to(path).as_posix() if f != path else ""
        h.update(f"{name}\0{f.stat().st_size}\0".encode("utf-8", "surrogateescape"))
        with open(f, "rb") as fh:
            while block := fh.read(1 << 20):
                h.update(block)
    return h.hexdigest()


@lru_cache(maxsize=1)
def _code_digest() -> str:
    """BLAKE2b of the source of the code that builds a Trace: the collectors and the model."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.blake2b(digest_size=16)
    for folder in ("collectors", "profiler/model"):
        for f in sorted((root / folder).rglob("*.py")):
            h.update(f.relative_to(root).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)


def _mtime(f: Path) -> float:
    try:
        return f.stat().st_mtime
    except OSError:
        return 0.0


def _prune(traces: Path, keep: Path) -> None:
    """Remove temporary folders left by killed processes, and the least recently read entries
    while the cache holds more than PERF_CACHE_MAX bytes."""
    env = os.environ.get("PERF_CACHE_MAX", "")
    cap = int(env) if env.isdigit() else DEFAULT_MAX_BYTES
    now = time.time()
    entries = []
    try:
        for d in traces.iterdir():  # traces/ here; streams/ too (profiler.api.stream)
            st = d.stat()
            if d.name.startswith(".tmp-"):
                if now - st.st_mtime > STALE_TMP_S:
                    _remove(d)
                continue
            try:
                used = (d / MANIFEST).stat().st_mtime
            except OSError:
                used = st.st_mtime
            used = max(used, _mtime(d / "meta.json"))  # a streamed entry's (it has no manifest)
            entries.append((used, sum(f.stat().st_size for f in d.iterdir()), d))
    except OSError:
        return
    total = sum(size for _, size, _ in entries)
    for _, size, d in sorted(entries, key=lambda e: e[0]):
        if total <= cap:
            break
        if d != keep:
            _remove(d)
            total -= size
