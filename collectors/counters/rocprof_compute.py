"""rocprof-compute (omniperf) workload folders, and rocprof v1/v2 wide CSVs (one row per dispatch,
one column per counter).

A workload folder holds `pmc_perf.csv` (every pass merged: dispatch identity, launch
parameters, counters, Start_Timestamp / End_Timestamp in ns), per-pass files such as
`SQ_INST_LEVEL_LDS.csv` whose counters pmc_perf may lack (read too, joined by Dispatch_ID),
`timestamps.csv` (the kernel timeline of the run: joined by Dispatch_ID, kernel names checked)
and `sysinfo.csv` (the GPU: model, arch, CUs, clocks; kept in `info`). Columns repeated across
passes carry a suffix (`wave_size_1`, `GRBM_COUNT_13`) and are kept as recorded.

Older rocprof (v1 `results.csv`) names the columns `Index`, `KernelName`, `gpu-id`, `grd`, `wgr`,
`BeginNs`, `EndNs`, and reports `FETCH_SIZE` / `WRITE_SIZE` in kilobytes (KB = 1024 bytes).
"""

from __future__ import annotations

import re
from pathlib import Path

from collectors.counters.csvtext import read_rows
from profiler.model.errors import InputError
from profiler.model.kernel_counters import KernelCounters, build, normalise, occurrences, parse_number

#: (dispatch, kernel, gpu, start, end, grid, block) column names, newest first.
_NAMES = (
    ("Dispatch_ID", "Kernel_Name", "GPU_ID", "Start_Timestamp", "End_Timestamp", "Grid_Size", "Workgroup_Size"),
    ("Index", "KernelName", "gpu-id", "BeginNs", "EndNs", "grd", "wgr"),
)
#: Identity columns, kept in the launches table; every other column is a counter row (code
#: object and signal addresses such as obj = 0x7871..., and queue, pid, tid, as text or numbers).
_IDENTITY = re.compile(r"(?i)^(dispatch_id|index|kernel_?name|gpu_id|gpu-id)$")
#: Units of the launch parameters and derived metrics rocprof writes (its hardware counters count
#: events: unit 'count').
_UNITS = {
    "Grid_Size": "work-item",
    "grd": "work-item",
    "Workgroup_Size": "work-item",
    "wgr": "work-item",
    "wave_size": "work-item",
    "LDS_Per_Workgroup": "byte",
    "lds": "byte",
    "Scratch_Per_Workitem": "byte",
    "scr": "byte",
    "Arch_VGPR": "register",
    "Accum_VGPR": "register",
    "SGPR": "register",
    "arch_vgpr": "register",
    "accum_vgpr": "register",
    "sgpr": "register",
    "FETCH_SIZE": "KB",
    "WRITE_SIZE": "KB",
}
_SKIP_FILES = {"timestamps.csv", "sysinfo.csv", "pmc_kernel_top.csv", "pmc_dispatch_info.csv", "roofline.csv"}


def is_rocprof_folder(path: Path) -> bool:
    return path.is_dir() and (path / "pmc_perf.csv").is_file()


def _unit(column: str) -> str:
    base = re.sub(r"_\d+$", "", column)
    if base in ("obj", "sig", "queue-id", "queue-index", "pid", "tid"):
        return ""
    if base in _UNITS:
        return _UNITS[base]
    if base.endswith(("Timestamp", "Ns")):
        return "ns"
    return "count"


def _columns(path: Path, header: list[str]) -> tuple[str, ...]:
    for names in _NAMES:
        if names[0] in header and names[1] in header:
            return names
    raise InputError(path, "not a rocprof counter CSV: missing column 'Dispatch_ID' (or 'Index') and 'Kernel_Name'")


def read_wide(path: Path, max_bytes: int | None, device_info: dict | None = None) -> tuple[list, dict]:
    """(counter rows, launch info by dispatch) of one wide rocprof CSV."""
    header, body = read_rows(path, max_bytes)
    names = _columns(path, header)
    col = {h: i for i, h in enumerate(header)}
    rows, launches = [], {}
    for n, r in enumerate(body):
        d = parse_number(r[col[names[0]]])
        if d is None:
            raise InputError(path, f"row {n + 2}: {names[0]} {r[col[names[0]]]!r} is not a number")
        dispatch, kernel = int(d), r[col[names[1]]]
        gpu = r[col[names[2]]].strip() if names[2] in col else ""
        device = f"gpu{gpu}" if gpu else ""
        values = {}
        for h, i in col.items():
            if _IDENTITY.match(h):
                continue
            number = parse_number(r[i])
            recorded = _unit(h)
            if number is None:
                value, unit, text = float("nan"), recorded, r[i].strip()
            else:
                (value, unit), text = normalise(number, recorded), ""
            rows.append((dispatch, kernel, h, value, unit, recorded if recorded != "count" else "", text, device))
            values[h] = value
        start, end = values.get(names[3], float("nan")), values.get(names[4], float("nan"))
        launches[dispatch] = {
            "kernel": kernel,
            "device": device,
            "start": int(start) if start == start else -1,
            "duration": end - start,
            "grid": r[col[names[5]]].strip() if names[5] in col else "",
            "block": r[col[names[6]]].strip() if names[6] in col else "",
        }
    return rows, launches


def read_rocprof_folder(path: str | Path, max_bytes: int | None = None) -> KernelCounters:
    """The counters of a rocprof-compute workload folder (module docstring)."""
    folder = Path(path)
    rows, launches = read_wide(folder / "pmc_perf.csv", max_bytes)
    have = {(r[0], r[2]) for r in rows}
    extra_files = 0
    for f in sorted(folder.glob("*.csv")):
        if f.name in _SKIP_FILES or f.name == "pmc_perf.csv":
            continue
        more, more_launches = read_wide(f, max_bytes)
        for d, info in more_launches.items():
            if d in launches and launches[d]["kernel"] != info["kernel"]:
                raise InputError(f, f"dispatch {d} is {info['kernel'][:60]!r} here but another kernel in pmc_perf.csv")
        new = [r for r in more if (r[0], r[2]) not in have]
        rows += new
        have |= {(r[0], r[2]) for r in new}
        extra_files += 1
    timeline = _timeline(folder, launches, max_bytes)
    order = sorted(launches)
    names = [launches[d]["kernel"] for d in order]
    out = [
        (
            d,
            launches[d]["kernel"],
            occ,
            launches[d]["device"],
            -1,
            launches[d]["start"],
            launches[d]["duration"],
            launches[d]["grid"],
            launches[d]["block"],
        )
        for d, occ in zip(order, occurrences(names))
    ]
    info = {**_sysinfo(folder, max_bytes), "timeline": timeline, "pass_files": extra_files}
    return build(rows, out, source="rocprof-compute", path=str(folder), info=info)


def _timeline(folder: Path, launches: dict, max_bytes: int | None) -> dict[str, int]:
    """timestamps.csv joined to the counter dispatches by Dispatch_ID: how many matched (same
    kernel name), and how many on each side had no partner."""
    f = folder / "timestamps.csv"
    if not f.is_file():
        return {}
    header, body = read_rows(f, max_bytes)
    names = _columns(f, header)
    col = {h: i for i, h in enumerate(header)}
    seen = {}
    for r in body:
        d = parse_number(r[col[names[0]]])
        if d is not None:
            seen[int(d)] = r[col[names[1]]]
    matched = sum(1 for d, k in seen.items() if d in launches and launches[d]["kernel"] == k)
    return {
        "matched": matched,
        "timeline_only": sum(1 for d in seen if d not in launches),
        "counters_only": sum(1 for d in launches if d not in seen),
        "name_mismatch": sum(1 for d, k in seen.items() if d in launches and launches[d]["kernel"] != k),
    }


def _sysinfo(folder: Path, max_bytes: int | None) -> dict[str, object]:
    f = folder / "sysinfo.csv"
    if not f.is_file():
        return {}
    header, body = read_rows(f, max_bytes)
    if not body:
        return {}
    return {h: body[0][i] for i, h in enumerate(header)}
