"""Perfetto: read native protobuf traces; write them (with the analysis attached) and Chrome JSON.

Imports of the protobuf classes stay inside the functions, so that detecting a format costs
nothing for the commands that read JSON.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from collectors.perfetto.detect import is_perfetto

if TYPE_CHECKING:
    import pandas as pd

    from profiler.model.trace import Trace

__all__ = ["is_perfetto", "load_perfetto", "write_chrome_json", "write_perfetto"]


def load_perfetto(path: str | Path, max_bytes: int | None = None) -> Trace:
    """A Perfetto protobuf trace (gzip or not) as a validated Trace (collectors.perfetto.load)."""
    from collectors.perfetto.load import load_perfetto as load

    return load(path, max_bytes)


def write_perfetto(
    trace: Trace,
    path: str | Path,
    units: pd.DataFrame | None = None,
    *,
    force: bool = False,
    inputs: Iterable[str | Path] = (),
) -> Path:
    """Write a native Perfetto trace; `units` (Analysis.units) rides on the slices (collectors.perfetto.write).
    Atomic; never over one of `inputs`; over an existing file only with `force`."""
    from collectors.perfetto.write import write_perfetto as write

    return write(trace, path, units, force=force, inputs=inputs)


def write_chrome_json(
    trace: Trace,
    path: str | Path,
    units: pd.DataFrame | None = None,
    *,
    force: bool = False,
    inputs: Iterable[str | Path] = (),
) -> list[Path]:
    """Write Kineto-style Chrome JSON, one file per rank (collectors.perfetto.chrome).
    Atomic; never over one of `inputs`; over an existing file only with `force`."""
    from collectors.perfetto.chrome import write_chrome_json as write

    return write(trace, path, units, force=force, inputs=inputs)
