"""The dashboard's server-side data: which traces are loaded, and their cached analyses.

A trace is known by the SHA-256 of its content (a directory: of its files' names and hashes),
so the same file uploaded twice is one trace, and a cache key never depends on a path the
browser sent. Parsed traces, analyses and derived views (timeline index, op table) are kept in
bounded LRU caches keyed by (content hash, hardware, what); an evicted entry is rebuilt from
its file. Uploads are written only inside the store's own temporary directory, under a name
built from their hash, and removed when they fail to parse or when the store closes.
"""

from __future__ import annotations

import base64
import functools
import binascii
import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profiler.model.errors import InputError
from profiler.model.files import GZIP_MAGIC, check_expanded
from profiler.model.files import check_regular
from profiler.model.redact import redact_text

if TYPE_CHECKING:
    from profiler.api import Analysis
    from profiler.model.trace import Trace

MiB = 2**20
#: The analysis passes the core pages read (profiler.api.SECTIONS); the others are not run.
#: verdict: the Overview opens with it; ranks: the Ranks page (multi-rank traces only).
CORE_SECTIONS = ("verdict", "summary", "ops", "roofline", "timeline", "advice", "ranks")
DEFAULT_UPLOAD_CAP = 512 * MiB
GiB = 2**30
_TRACE_SUFFIXES = (".json", ".json.gz")


class _Build:
    """One entry being built: later requests for the same key wait for it, not for the lock."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None

    def result(self) -> Any:
        self.done.wait()
        if self.error is not None:
            raise self.error
        return self.value


class LRU:
    """A size-bounded least-recently-used cache; `get(key, build)` builds a missing entry.

    The lock guards only the dictionaries, never a build: a build runs in the thread that asked
    first, and requests for the same key wait for that one build (so a trace is parsed once),
    while requests for other keys -- another user's page -- are served meanwhile. Memory held:
    `maxsize` entries plus the builds in progress.
    """

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._building: dict[Hashable, _Build] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            pending = self._building.get(key)
            mine = pending is None
            if mine:
                pending = self._building[key] = _Build()
        assert pending is not None
        if not mine:
            return pending.result()
        try:
            pending.value = build()
        except BaseException as e:
            pending.error = e
            raise
        else:
            with self._lock:
                self._items[key] = pending.value
                while len(self._items) > self.maxsize:
                    self._items.popitem(last=False)
            return pending.value
        finally:
            with self._lock:
                self._building.pop(key, None)
            pending.done.set()

    def drop(self, match: Callable[[Hashable], bool]) -> None:
        with self._lock:
            for k in [k for k in self._items if match(k)]:
                del self._items[k]

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._items


@dataclass(frozen=True)
class Entry:
    """A loaded trace: `trace_id` (content hash prefix), a display `label`, where its bytes are."""

    trace_id: str
    label: str
    path: Path
    uploaded: bool


def file_hash(path: Path) -> str:
    """SHA-256 hex of a file's bytes (a directory: of its trace files' names and hashes, sorted)."""
    h = hashlib.sha256()
    if path.is_dir():
        for f in sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(_TRACE_SUFFIXES)):
            h.update(f.name.encode() + b"\0" + file_hash(f).encode())
        return h.hexdigest()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(4 * MiB), b""):
            h.update(block)
    return h.hexdigest()


class TraceStore:
    """Registry of traces plus the LRU caches of what the pages need."""

    def __init__(
        self,
        *,
        upload_cap: int = DEFAULT_UPLOAD_CAP,
        expanded_cap: int | None = None,
        max_traces: int = 4,
        max_analyses: int = 8,
        max_views: int = 256,
        max_bytes: int | None = None,
    ) -> None:
        self.upload_cap = upload_cap
        self.expanded_cap = expanded_cap if expanded_cap is not None else default_expanded_cap()
        self.max_bytes = (
            max_bytes  # the most read of one trace file, decompressed (None: profiler.model.files' default)
        )
        self._entries: dict[str, Entry] = {}
        self._order: list[str] = []
        self._lock = threading.Lock()
        self._traces = LRU(max_traces)
        self._analyses = LRU(max_analyses)
        self._views = LRU(max_views)
        self._tmp: Path | None = None  # created on the first upload, never at construction
        self.compile_report: Any = None  # a TORCH_TRACE directory's CompileReport (perf dashboard --compile-log)
        self.counters_report: Any = None  # hardware counters' CountersReport (perf dashboard --counters)
        self.numerics: dict[str, Any] | None = None  # a perf.numerics document (perf dashboard --numerics)
        self.trials_docs: list[dict] = []  # trials databases as documents (perf dashboard --trials)

    # --- registry -------------------------------------------------------------------------
    def add_path(self, path: str | Path) -> str:
        """Register a trace file or directory given on the command line; returns its id."""
        p = Path(path)
        if not p.is_dir():
            check_regular(p)  # missing, a FIFO, a device: refused before a read could block
        return self._register(file_hash(p), redact_text(p.name or str(p)), p, uploaded=False)

    def add_upload(self, filename: str, contents: str) -> str:
        """Register a trace uploaded through the page (`contents`: a data URL, base64).

        Checks the size against `upload_cap` before decoding, writes the bytes inside this
        store's temporary directory under a hash-derived name, parses it once (so a broken file
        is reported now, and removed), and returns its id. Raises InputError(filename, problem).
        """
        label = safe_label(filename)
        _, _, b64 = (contents or "").partition(",")
        if len(b64) * 3 // 4 > self.upload_cap:  # base64: 4 characters carry 3 bytes
            raise InputError(
                label,
                f"file is about {len(b64) * 3 // 4 / MiB:.1f} MiB; "
                f"the upload limit is {self.upload_cap / MiB:.0f} MiB (perf dashboard --max-upload-mb)",
            )
        try:
            raw = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            raise InputError(label, "the upload is not valid base64 data") from None
        if not raw:
            raise InputError(label, "the file is empty")
        if raw[:2] == GZIP_MAGIC:
            check_expanded(raw, self.expanded_cap, label)
        digest = hashlib.sha256(raw).hexdigest()
        if digest[:16] in self._entries:
            return digest[:16]
        suffix = ".json.gz" if raw[:2] == GZIP_MAGIC else ".json"
        path = self.upload_dir() / f"{digest[:32]}{suffix}"  # our name, never the browser's
        path.write_bytes(raw)
        tid = self._register(digest, label, path, uploaded=True)
        try:
            self.trace(tid)
        except BaseException:
            self.remove(tid)
            raise
        return tid

    def upload_dir(self) -> Path:
        with self._lock:
            if self._tmp is None:
                self._tmp = Path(tempfile.mkdtemp(prefix="perf-dashboard-"))
            return self._tmp

    def _register(self, digest: str, label: str, path: Path, uploaded: bool) -> str:
        tid = digest[:16]
        with self._lock:
            if tid not in self._entries:
                self._entries[tid] = Entry(tid, label, path, uploaded)
                self._order.append(tid)
        return tid

    def remove(self, tid: str) -> None:
        """Forget a trace and its cached results; delete its file if it was uploaded."""
        with self._lock:
            entry = self._entries.pop(tid, None)
            if tid in self._order:
                self._order.remove(tid)
        for cache in (self._traces, self._analyses, self._views):
            cache.drop(lambda k: k == tid or (isinstance(k, tuple) and k[0] == tid))
        if entry is not None and entry.uploaded:
            entry.path.unlink(missing_ok=True)

    def entries(self) -> list[Entry]:
        with self._lock:
            return [self._entries[t] for t in self._order]

    def entry(self, tid: str | None) -> Entry | None:
        return self._entries.get(tid) if isinstance(tid, str) else None  # the browser may send anything

    def close(self) -> None:
        """Delete the temporary directory and every upload in it."""
        with self._lock:
            tmp, self._tmp = self._tmp, None
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)

    # --- cached results -------------------------------------------------------------------
    def trace(self, tid: str) -> Trace:
        """The parsed trace (InputError for an unknown id or a file that does not parse)."""
        from profiler.api import load_trace

        entry = self._need(tid)
        return self._traces.get(tid, lambda: load_trace(entry.path, max_bytes=self.max_bytes))

    def analysis(self, tid: str, hardware: str | None = None) -> Analysis:
        """`analyze(trace, top=None, hardware=..., sections=CORE_SECTIONS)`, cached per (trace, hardware).

        `hardware` must be a preset name (profiler.model.hardware.presets()): the browser picks from
        a list, and a name outside it is refused rather than read as a file path.
        """
        from profiler.api import analyze

        hw = check_hardware(hardware)
        self._need(tid)
        return self._analyses.get(
            (tid, hw or ""), lambda: analyze(self.trace(tid), top=None, hardware=hw, sections=CORE_SECTIONS)
        )

    def compile_tables(self, tid: str | None, hardware: str | None = None) -> dict:
        """profiler.api.compile_tables for the compiler page, cached per (trace, hardware): the
        --compile-log report joined to the trace's kernels when there is one, else the trace's own
        compile passes and tables. Without a trace, the report alone (not cached: no key)."""
        from profiler.api import compile_tables

        hw = check_hardware(hardware)
        if self.compile_report is not None and not tid:
            return compile_tables(self.compile_report, hardware=hw)
        source = self.compile_report
        return self.view(
            tid or "",
            hw,
            "compiler",
            lambda: compile_tables(
                source if source is not None else self.trace(tid or ""), trace=self.trace(tid or ""), hardware=hw
            ),
        )

    def view(self, tid: str, hardware: str | None, what: str, build: Callable[[], Any]) -> Any:
        """A derived product (op table, timeline index) cached per (trace, hardware, what)."""
        self._need(tid)
        return self._views.get((tid, check_hardware(hardware) or "", what), build)

    def answer(self, tid: str, hardware: str | None, what: str, args: Any, build: Callable[[], Any]) -> Any:
        """A callback's whole answer for these inputs, cached as plain JSON data (`plain`).

        Pages are the same for every user who asks with the same inputs, and building one costs
        far more than sending it: plotly validates each figure as it is built and Dash encodes
        components and numpy arrays on every response (an overview took 0.2 s with its analysis
        cached; 50 sessions queued behind such work to a p99 of 3-5 s). Built once, outside any
        shared lock, then sent from the cache.
        """
        return self.view(
            tid, hardware, f"answer:{what}:{json.dumps(args, sort_keys=True, default=str)}", lambda: plain(build())
        )

    def _need(self, tid: str) -> Entry:
        entry = self.entry(tid)
        if entry is None:
            raise InputError(None, "no trace selected (pass one to perf dashboard, or upload one)")
        return entry


def plain(value: Any) -> Any:
    """Dash components, plotly figures and numpy arrays -> the JSON data Dash would send for
    them (dicts, lists, numbers, strings), which Dash sends again as they are."""
    from plotly.io.json import to_json_plotly

    return json.loads(to_json_plotly(value))


def default_expanded_cap() -> int:
    """How many bytes an upload may decompress to: an eighth of the memory available now (the
    parse and analysis take several times the JSON's size), at least 256 MiB, at most 4 GiB."""
    try:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        avail = 16 * GiB
    return int(min(4 * GiB, max(256 * MiB, avail // 8)))


@functools.cache
def _preset_names() -> frozenset[str]:
    """The shipped presets, listed once (every request checks its hardware against them)."""
    from profiler.model.hardware import presets

    return frozenset(presets())


def check_hardware(hardware: str | None) -> str | None:
    """A preset name from the browser, or None for the matched specs; anything else (a YAML path)
    is refused, so the browser can never make the server read a file."""
    if hardware and (not isinstance(hardware, str) or hardware not in _preset_names()):
        raise InputError(None, f"unknown hardware preset {hardware!r:.60}")
    return hardware or None


def safe_label(filename: str | None) -> str:
    """The uploaded file's base name for display: no directories, printable, redacted, short."""
    name = re.split(r"[\\/]", str(filename or "upload"))[-1]
    name = re.sub(r"[^\w.\- ]", "_", name)[:80] or "upload"
    return redact_text(name)
