"""torch.compile's structured log (what `TORCH_TRACE` writes and tlparse reads), as `Record`s.

Two ways in, one shape out:

- `read_torch_trace(dir_or_file)`: the files `TORCH_TRACE=<dir>` leaves behind. Each record is
  one glog-prefixed line, ``V1202 16:12:15.881000 9946 torch/_dynamo/utils.py:2350] {json}``,
  followed by its payload, one line per payload line, each prefixed with a tab. File names in
  stacks are interned: ``{"str": ["/path/model.py", 1]}`` defines index 1.
- `capture()`: a context manager that attaches a handler to torch's `torch.__trace` logger in
  this process, receiving the same metadata and payloads as the file would (trace_structured
  only does its work while the logger has a handler).

A record's kind is its first metadata key (`chromium_event`, `dynamo_start`, `artifact`,
`compilation_metrics`, `inductor_output_code`, ...); `compile_id` is Dynamo's
"<frame_id>/<frame_compile_id>" (with "_<attempt>" dropped: attempts are restarts of one compile).
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from profiler.model.errors import InputError
from profiler.model.files import read_bounded
from profiler.model.trace import Problems

_PREFIX = re.compile(r"^[VIWEC]\d{4} \d\d:\d\d:\d\d\.\d+ +(?P<thread>\d+) [^\]]*\] ")
TRACE_LOGGER = "torch.__trace"


@dataclass(frozen=True)
class Record:
    """One structured-log record: its kind, metadata (the JSON object) and payload text."""

    kind: str
    meta: dict[str, Any]
    payload: str | None = None
    thread: int = 0  # the logging thread (glog's thread id in a file; Python's ident in-process)
    generation: int = 0  # how many torch._dynamo.reset()s before it restarted this compile id

    @property
    def compile_id(self) -> str:
        """'<frame_id>/<frame_compile_id>', '' when the record belongs to no compile."""
        f, c = self.meta.get("frame_id"), self.meta.get("frame_compile_id")
        if f is None or c is None:
            return ""
        ca = self.meta.get("compiled_autograd_id")
        cid = f"!{ca}/{f}/{c}" if ca is not None else f"{f}/{c}"
        return f"{cid}#{self.generation}" if self.generation else cid

    @property
    def body(self) -> Any:
        """The metadata under the record's kind (e.g. the compilation_metrics dict)."""
        return self.meta.get(self.kind)

    @property
    def artifact(self) -> str:
        """The artifact name for kind 'artifact' records, else ''."""
        body = self.body
        return str(body.get("name", "")) if self.kind == "artifact" and isinstance(body, dict) else ""

    def json_payload(self) -> Any:
        """The payload parsed as JSON; None when absent or not JSON (some 'json' artifacts are text)."""
        if not self.payload:
            return None
        try:
            return orjson.loads(self.payload)
        except orjson.JSONDecodeError:
            return None


@dataclass
class Log:
    """The records of one compile session, in order, and the problems met reading them."""

    records: list[Record] = field(default_factory=list)
    problems: Problems = field(default_factory=Problems)
    source: str = ""  # the directory or file read, or 'in-process capture'

    def of(self, kind: str, artifact: str | None = None) -> list[Record]:
        return [r for r in self.records if r.kind == kind and (artifact is None or r.artifact == artifact)]


def _record(meta: Any, payload: str | None, thread: int = 0) -> Record | None:
    if not isinstance(meta, dict) or not meta:
        return None
    return Record(kind=next(iter(meta)), meta=meta, payload=payload, thread=thread)


def parse_lines(lines: Iterator[str], log: Log) -> None:
    """Append the records of one TORCH_TRACE file's lines to `log`; unreadable lines are counted."""
    meta: Any = None
    payload: list[str] | None = None
    thread = 0

    def flush() -> None:
        if meta is None:
            return
        rec = _record(meta, "\n".join(payload) if payload is not None else None, thread)
        if rec is None:
            log.problems.add("structured-log records without metadata skipped")
        else:  # interned file names ('str' records) are kept: interned_files() resolves them
            log.records.append(rec)

    for line in lines:
        line = line.rstrip("\n")
        if line.startswith("\t"):
            if payload is None:
                payload = []
            payload.append(line[1:])
            continue
        if not line.strip():
            continue
        flush()
        meta, payload = None, None
        m = _PREFIX.match(line)
        if not m:
            log.problems.add("structured-log lines without a glog prefix skipped")
            continue
        thread = int(m["thread"])
        if thread >= 2**63:  # glog writes a 64-bit id; more digits would not fit the tables' int64 column
            log.problems.add("structured-log lines with a thread id past 64 bits skipped")
            continue
        try:
            meta = orjson.loads(line[m.end() :])
        except orjson.JSONDecodeError:
            log.problems.add("structured-log lines with unreadable JSON skipped")
    flush()


def read_torch_trace(path: str | Path, max_bytes: int | None = None) -> Log:
    """The records of a TORCH_TRACE directory (every `*.log` in it, by name) or of one file; only
    regular files, each at most `max_bytes` (profiler.model.files.read_bounded)."""
    path = Path(path)
    if path.is_dir():
        try:
            files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix == ".log")
        except OSError as e:
            raise InputError(path, f"cannot read the directory: {e.strerror or e}") from None
        if not files:
            raise InputError(path, "no structured-log files (*.log) in this TORCH_TRACE directory")
    else:  # missing, special (a FIFO, a device) or unreadable: read_bounded says which
        files = [path]
    log = Log(source=str(path))
    for f in files:
        text = read_bounded(f, max_bytes).decode("utf-8", "replace")
        parse_lines(io.StringIO(text), log)
        del text
    number_generations(log)
    if not any(r.kind != "str" for r in log.records):
        why = "; ".join(log.problems.lines()) or "no records"
        raise InputError(path, f"not a torch.compile structured log ({why})")
    return log


class _Handler(logging.Handler):
    def __init__(self, log: Log) -> None:
        super().__init__(logging.DEBUG)
        self.log = log

    def emit(self, record: logging.LogRecord) -> None:
        rec = _record(getattr(record, "metadata", None), getattr(record, "payload", None), record.thread or 0)
        if rec is not None:
            self.log.records.append(rec)


@contextmanager
def capture() -> Iterator[Log]:
    """Collect the structured-log records torch.compile emits in this process while inside.

    The handler is removed on exit, so records stop; a TORCH_TRACE handler already installed
    keeps working beside it.
    """
    log = Log(source="in-process capture")
    handler = _Handler(log)
    logger = logging.getLogger(TRACE_LOGGER)
    logger.addHandler(handler)
    try:
        yield log
    finally:
        logger.removeHandler(handler)
        number_generations(log)


def number_generations(log: Log) -> None:
    """Tell apart compiles that reuse an id after `torch._dynamo.reset()` (ids restart at 0/0):
    a compile id whose `compilation_metrics` was already logged starts a new generation at its
    next Dynamo start (the 'dynamo' begin event or `dynamo_start`); its records get '#<n>'."""
    finished: set[str] = set()
    gen: dict[str, int] = {}
    out = []
    for r in log.records:
        cid = r.compile_id
        if cid and cid in finished and _starts_compile(r):
            gen[cid] = gen.get(cid, 0) + 1
            finished.discard(cid)
        g = gen.get(cid, 0) if cid else 0
        out.append(Record(r.kind, r.meta, r.payload, r.thread, g) if g != r.generation else r)
        if r.kind == "compilation_metrics" and cid:
            finished.add(cid)
    log.records[:] = out


def _starts_compile(r: Record) -> bool:
    if r.kind == "dynamo_start":
        return True
    if r.kind == "chromium_event" and r.payload and '"dynamo"' in r.payload:
        ev = r.json_payload()
        return isinstance(ev, dict) and ev.get("name") == "dynamo" and ev.get("ph") == "B"
    return False


def interned_files(log: Log) -> dict[int, str]:
    """Index -> file name, from the `{"str": [name, index]}` records."""
    out: dict[int, str] = {}
    for r in log.of("str"):
        body = r.body
        if isinstance(body, list) and len(body) == 2 and isinstance(body[1], int):
            out[body[1]] = str(body[0])
    return out
