"""Perfetto: read native protobuf traces; write them (with the analysis attached) and Chrome JSON.

Imports of the protobuf classes stay inside the functions, so that detecting a format costs
nothing for the commands that read JSON.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from collectors.perfetto.detect import is_perfetto

if TYPE_CHECKING:
    import pandas as pd

    from profiler.model.trace import Trace

__all__ = ["is_perfetto", "load_perfetto", "write_chrome_json", "write_perfetto"]


def load_perfetto(path: str | Path) -> Trace:
    """A Perfetto protobuf trace (gzip or not) as a validated Trace (collectors.perfetto.load)."""
    from collectors.perfetto.load import load_perfetto as load

    return load(path)


def write_perfetto(trace: Trace, path: str | Path, units: pd.DataFrame | None = None) -> Path:
    """Write a native Perfetto trace; `units` (Analysis.units) rides on the slices (collectors.perfetto.write)."""
    from collectors.perfetto.write import write_perfetto as write

    return write(trace, path, units)


def write_chrome_json(trace: Trace, path: str | Path, units: pd.DataFrame | None = None) -> list[Path]:
    """Write Kineto-style Chrome JSON, one file per rank (collectors.perfetto.chrome)."""
    from collectors.perfetto.chrome import write_chrome_json as write

    return write(trace, path, units)
