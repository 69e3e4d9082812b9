"""Export a loaded trace for Perfetto (ui.perfetto.dev): the native protobuf writer of
collectors/perfetto, reached through the facade (the dashboard imports the facade and the model
only: docs/architecture.md), with the analysis riding on the slices."""

from __future__ import annotations

import gzip

import pandas as pd

from profiler.model.trace import Trace


def export_trace(trace: Trace, units: pd.DataFrame | None = None) -> tuple[bytes, str]:
    """(gzip bytes, file suffix) of `trace` as a native Perfetto trace; `units` (Analysis.units)
    rides on the slices."""
    from profiler.api import perfetto_bytes

    return gzip.compress(perfetto_bytes(trace, units), compresslevel=6), ".perfetto-trace.gz"
