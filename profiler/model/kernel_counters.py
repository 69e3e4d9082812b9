"""`KernelCounters`: hardware counters measured per kernel launch (Nsight Compute, rocprof,
CUPTI), the currency between the counter readers (collectors/counters) and the analysis
(analysis/counters.py, analysis/measured_roofline.py).

Not the trace's `counters` table (time-series samples such as memory in use): these are one value
per counter per kernel launch, long form.

    rows:     one row per (launch, counter): KERNEL_COUNTER_COLUMNS
    launches: one row per launch: LAUNCH_COLUMNS

Units are normalised to a base unit (byte, ns, cycle, inst, ...) with the recorded unit kept
beside it (`unit_recorded`), so '1.5 Mbyte' reads as value 1.5e6, unit 'byte'.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import pandas as pd

from profiler.model.schema import Column

KERNEL_COUNTER_COLUMNS: tuple[Column, ...] = (
    Column("launch", "int64", "", "The launch's index in the file (ncu ID, rocprof Dispatch_ID, trace order)."),
    Column("kernel", "str", "", "Kernel name as recorded (rocprof's ' [clone .kd]' suffix kept)."),
    Column("counter", "str", "", "Counter or metric name as the profiler writes it."),
    Column("value", "float64", "", "The value in `unit` (normalised); NaN when the recorded value is text."),
    Column("unit", "str", "", "Normalised unit: byte, ns, cycle, inst, %, count, ... ('' when dimensionless)."),
    Column("unit_recorded", "str", "", "The unit as the file wrote it (e.g. 'Mbyte', 'KB'); '' when none."),
    Column("text", "str", "", "The recorded value when it is not a number (e.g. 'CachePreferNone'); else ''."),
    Column("device", "str", "", "Device as recorded ('gpu2', 'A100 (cc 8.0)'); '' when the file does not say."),
)

LAUNCH_COLUMNS: tuple[Column, ...] = (
    Column("launch", "int64", "", "The launch's index in the file."),
    Column("kernel", "str", "", "Kernel name as recorded."),
    Column("occurrence", "int64", "", "How many launches of this kernel name came before it in the file."),
    Column("device", "str", "", "Device as recorded; '' when not."),
    Column("correlation", "int64", "", "The runtime's correlation id of the launch; -1 when not recorded."),
    Column("start_ns", "int64", "ns", "Start timestamp as recorded; -1 when not recorded."),
    Column("duration_ns", "float64", "ns", "Measured kernel time; NaN when the file has none."),
    Column("grid", "str", "", "Launch grid as recorded ('(48, 1, 1)', rocprof: work-items); '' when not."),
    Column("block", "str", "", "Block / workgroup size as recorded; '' when not."),
)

#: Recorded unit -> (normalised unit, factor). Nsight Compute writes SI prefixes (Kbyte = 1e3
#: bytes: NVIDIA Nsight Compute docs, "Metrics Reference", units); rocprof's FETCH_SIZE and
#: WRITE_SIZE are in kilobytes of 1024 bytes (rocprof v1 derived metrics: "FETCH_SIZE: The total
#: kilobytes fetched from the video memory").
UNITS: dict[str, tuple[str, float]] = {
    "byte": ("byte", 1.0),
    "bytes": ("byte", 1.0),
    "Kbyte": ("byte", 1e3),
    "Mbyte": ("byte", 1e6),
    "Gbyte": ("byte", 1e9),
    "Tbyte": ("byte", 1e12),
    "KB": ("byte", 1024.0),
    "MB": ("byte", 1024.0**2),
    "GB": ("byte", 1024.0**3),
    "nsecond": ("ns", 1.0),
    "ns": ("ns", 1.0),
    "usecond": ("ns", 1e3),
    "us": ("ns", 1e3),
    "msecond": ("ns", 1e6),
    "ms": ("ns", 1e6),
    "second": ("ns", 1e9),
    "cycle": ("cycle", 1.0),
    "Kcycle": ("cycle", 1e3),
    "Mcycle": ("cycle", 1e6),
    "inst": ("inst", 1.0),
    "Kinst": ("inst", 1e3),
    "Minst": ("inst", 1e6),
    "Ginst": ("inst", 1e9),
    "cycle/second": ("cycle/s", 1.0),
    "cycle/nsecond": ("cycle/s", 1e9),
    "cycle/usecond": ("cycle/s", 1e6),
    "byte/second": ("byte/s", 1.0),
    "Kbyte/second": ("byte/s", 1e3),
    "Mbyte/second": ("byte/s", 1e6),
    "Gbyte/second": ("byte/s", 1e9),
    "Tbyte/second": ("byte/s", 1e12),
}

_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def parse_number(text: str) -> float | None:
    """A recorded number: thousands separators ('4,194,688') and spaces dropped; None when
    `text` is not a number (a text value such as 'CachePreferNone', or '')."""
    t = text.strip().replace(",", "").replace("\u202f", "").replace(" ", "")
    if not _NUMBER.fullmatch(t):
        return None
    return float(t)


def normalise(value: float, unit: str) -> tuple[float, str]:
    """(value in the base unit, base unit) of a value recorded in `unit`; units not in UNITS
    ('%', 'warp', 'block', 'register/thread') are kept as they are."""
    base, factor = UNITS.get(unit.strip(), (unit.strip(), 1.0))
    return value * factor, base


@dataclass(frozen=True)
class KernelCounters:
    """Counters of the kernel launches of one counter file or folder.

    rows / launches: as the module docstring says. `source` names the format ('ncu',
    'rocprof-compute', 'rocprofv3', 'kineto-cupti'); `path` the file or folder read; `skipped`
    counts what was read but is not a counter (e.g. Nsight Compute's rule rows), by reason.
    """

    rows: pd.DataFrame
    launches: pd.DataFrame
    source: str
    path: str
    skipped: dict[str, int] = field(default_factory=dict)
    info: dict[str, object] = field(default_factory=dict)  # sysinfo: gpu, arch, clocks (rocprof)

    def wide(self) -> pd.DataFrame:
        """One row per launch, one column per counter (values in their normalised units)."""
        if not len(self.rows):
            return pd.DataFrame(index=pd.Index([], name="launch"))
        return self.rows.pivot_table(index="launch", columns="counter", values="value", aggfunc="first", dropna=False)

    def units(self) -> dict[str, str]:
        """counter -> normalised unit."""
        return dict(zip(self.rows["counter"], self.rows["unit"]))


def build(rows: list[tuple], launches: list[tuple], **kw: object) -> KernelCounters:
    """A KernelCounters from row tuples in KERNEL_COUNTER_COLUMNS / LAUNCH_COLUMNS order."""
    r = pd.DataFrame(rows, columns=[c.name for c in KERNEL_COUNTER_COLUMNS])
    r = r.astype({c.name: ("object" if c.dtype == "str" else c.dtype) for c in KERNEL_COUNTER_COLUMNS})
    lc = pd.DataFrame(launches, columns=[c.name for c in LAUNCH_COLUMNS])
    lc = lc.astype({c.name: ("object" if c.dtype == "str" else c.dtype) for c in LAUNCH_COLUMNS})
    return KernelCounters(rows=r, launches=lc, **kw)  # type: ignore[arg-type]


def occurrences(names: list[str]) -> list[int]:
    """For each name, how many times it appeared before (the n-th launch of that kernel)."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        out.append(seen.get(n, 0))
        seen[n] = out[-1] + 1
    return out


def finite(x: object) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)
