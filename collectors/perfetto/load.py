"""Load a Perfetto protobuf trace file (gzip or not) as a `Trace`; recognise one by its bytes."""

from __future__ import annotations

import os
from pathlib import Path

from collectors.kineto.decode import read_bytes
from collectors.perfetto.build import build_trace
from collectors.perfetto.read import parse, read_packets
from profiler.model.errors import InputError
from profiler.model.trace import Trace

TP_ENV = "PERFETTO_TP_BIN"


def load_perfetto(path: str | Path) -> Trace:
    """A Perfetto protobuf trace as a validated Trace.

    With PERFETTO_TP_BIN set to a trace_processor_shell binary, the file is read by that binary
    instead (SQL over its slice/counter/flow tables: for traces too large to parse in Python).
    """
    path = Path(path)
    if not path.exists():
        raise InputError(path, "no such file or directory")
    if path.is_dir():
        raise InputError(path, "is a directory; a Perfetto trace is one file")
    if os.environ.get(TP_ENV):
        from collectors.perfetto.tp import load_with_trace_processor

        return load_with_trace_processor(path, os.environ[TP_ENV])
    data = read_bytes(path)
    trace = parse(path, data)
    del data
    raw = read_packets(trace)
    del trace
    return build_trace(path, raw)
