"""Load a Perfetto protobuf trace file (gzip or not) as a `Trace`; recognise one by its bytes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from collectors.perfetto.build import build_trace
from collectors.perfetto.read import parse, read_packets
from profiler.model.errors import InputError
from profiler.model.files import check_regular, read_bounded
from profiler.model.trace import Trace

TP_ENV = "PERFETTO_TP_BIN"


def load_perfetto(path: str | Path, max_bytes: int | None = None) -> Trace:
    """A Perfetto protobuf trace as a validated Trace; its (decompressed) bytes at most
    `max_bytes` (default: half the memory available; profiler.model.files.read_bounded).

    With PERFETTO_TP_BIN set to a trace_processor_shell binary, the file is read by that binary
    instead (SQL over its slice/counter/flow tables: for traces too large to parse in Python).
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(path, "is a directory; a Perfetto trace is one file")
    if os.environ.get(TP_ENV):
        from collectors.perfetto.tp import load_with_trace_processor

        check_regular(path)
        return load_with_trace_processor(path, os.environ[TP_ENV])
    data = read_bounded(path, max_bytes)
    try:
        trace = parse(path, data)
        del data
        raw = read_packets(trace)
    except RecursionError:  # nested debug annotations or their legacy JSON values
        raise InputError(
            path, f"not a readable Perfetto trace: values nested deeper than {sys.getrecursionlimit()} levels"
        ) from None
    del trace
    return build_trace(path, raw)
