"""Nsight Compute `ncu --csv` long form: one row per metric per kernel launch.

Columns (ncu 2021.2 and later): "ID", "Process ID", "Process Name", "Host Name", "Kernel Name",
"Kernel Time" (older) or "Context"/"Stream"/"Block Size"/"Grid Size"/"Device"/"CC" (newer),
"Section Name", "Metric Name", "Metric Unit", "Metric Value", and rule columns ("Rule Name",
"Rule Type", "Rule Description", newer "Estimated Speedup"). Rule rows (a rule's advice, no
metric) are counted under `skipped`, not read as counters. Values carry thousands separators
('4,194,688'); units are ncu's (byte, Kbyte, Mbyte, nsecond, usecond, cycle, inst, %).
"""

from __future__ import annotations

from pathlib import Path

from collectors.counters.csvtext import read_rows, require
from profiler.model.errors import InputError
from profiler.model.kernel_counters import KernelCounters, build, normalise, occurrences, parse_number

NEEDED = ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")


def is_ncu_header(first_line: str) -> bool:
    return '"Metric Name"' in first_line or "Metric Name," in first_line


def read_ncu(path: str | Path, max_bytes: int | None = None) -> KernelCounters:
    """The counters of an `ncu --csv` long-form file (module docstring)."""
    header, body = read_rows(path, max_bytes, header_starts="ID", min_fields="Metric Value")
    col = require(path, header, NEEDED, "an Nsight Compute long-form CSV (ncu --csv)")
    get = lambda r, name: r[col[name]] if name in col else ""  # noqa: E731
    rows: list[tuple] = []
    seen: dict[int, list] = {}  # launch -> [kernel, device, grid, block, duration]
    rules = 0
    for i, r in enumerate(body):
        metric = r[col["Metric Name"]].strip()
        if not metric:
            if get(r, "Rule Name").strip() or get(r, "Rule Description").strip():
                rules += 1
                continue
            raise InputError(path, f"row {i + 2}: no metric name and no rule")
        launch_number = parse_number(r[col["ID"]])
        launch = int(launch_number) if launch_number is not None else None
        if launch is None:
            raise InputError(path, f"row {i + 2}: ID {r[col['ID']]!r} is not a number")
        kernel = r[col["Kernel Name"]]
        device = _device(get(r, "Device"), get(r, "CC"))
        recorded_unit = r[col["Metric Unit"]].strip()
        raw = r[col["Metric Value"]]
        number = parse_number(raw)
        if number is None:
            value, unit, text = float("nan"), recorded_unit, raw.strip()
        else:
            value, unit = normalise(number, recorded_unit)
            text = ""
        rows.append((launch, kernel, metric, value, unit, recorded_unit, text, device))
        info = seen.setdefault(launch, [kernel, device, get(r, "Grid Size"), get(r, "Block Size"), float("nan")])
        if metric == "Grid Size" and not info[2]:
            info[2] = raw.strip()
        elif metric == "Block Size" and not info[3]:
            info[3] = raw.strip()
        elif metric == "gpu__time_duration.sum" and number is not None:
            info[4] = value
    order = sorted(seen)
    names = [seen[k][0] for k in order]
    launches = [
        (k, seen[k][0], occ, seen[k][1], -1, -1, seen[k][4], seen[k][2], seen[k][3])
        for k, occ in zip(order, occurrences(names))
    ]
    if not rows:
        raise InputError(path, "no metric rows (an ncu --csv file lists one row per metric per kernel)")
    return build(rows, launches, source="ncu", path=str(path), skipped={"rule rows": rules} if rules else {})


def _device(device: str, cc: str) -> str:
    device, cc = device.strip(), cc.strip()
    if device and cc:
        return f"gpu{device} (cc {cc})" if device.isdigit() else f"{device} (cc {cc})"
    return f"gpu{device}" if device.isdigit() else device
