"""Read a SCALE-Sim report folder (SCALE-Sim v2/v3, `scalesim/simulator.py` generate_reports)
into a `Trace`.

Columns read (header names as SCALE-Sim writes them, each after ', '):

- COMPUTE_REPORT.csv (required): LayerID, Total Cycles (incl. prefetch), Total Cycles,
  Stall Cycles, Overall Util %, Mapping Efficiency %, Compute Util %
- BANDWIDTH_REPORT.csv (optional): LayerID, Avg IFMAP SRAM BW, Avg FILTER SRAM BW,
  Avg OFMAP SRAM BW, Avg IFMAP DRAM BW, Avg FILTER DRAM BW, Avg OFMAP DRAM BW (words/cycle)
- DETAILED_ACCESS_REPORT.csv (optional): LayerID, then for SRAM and DRAM and each of IFMAP,
  Filter, OFMAP: Start Cycle, Stop Cycle, Reads (Writes for OFMAP), cycles relative to the
  start of the layer's compute (DRAM prefetch starts before it: negative)

The trace: layers run one after another, as SCALE-Sim simulates them. Layer i starts where
layer i-1's `Total Cycles (incl. prefetch)` ended; its compute (one `kernel` event on
rank0/npu0/array, `Total Cycles` long, named by the topology file's layer name when the folder
holds one, else 'layer<i>') starts after its prefetch, `-min(DRAM start cycles, 0)` cycles in;
each DRAM stream is a `dma` event on its own track (rank0/npu0/dram_ifmap, dram_filter,
dram_ofmap; name 'DRAM IFMAP read, N words').
Counters on rank0/npu0/array and rank0/npu0/bandwidth: the layer's utilisations (%) and
average bandwidths (words/cycle) from its compute start, 0 from its end.
Cycles -> ns at `clock_hz` (SCALE-Sim has no clock; default 1 GHz, 1 cycle = 1 ns, stated in
metadata['clock_hz'] and metadata['clock_note']). Array size and dataflow come from a
`*.cfg` in the folder (ArrayHeight, ArrayWidth, Dataflow) when there is exactly one.
"""

from __future__ import annotations

import configparser
import csv
import io
from pathlib import Path

import numpy as np

from profiler.model.errors import InputError
from profiler.model.files import read_bounded
from profiler.model.schema import COUNTER_COLUMNS, DEVICE_COLUMNS, EVENT_COLUMNS, FLOW_COLUMNS, Kind
from profiler.model.redact_trace import redact_trace
from profiler.model.rows import rows_frame as table
from profiler.model.trace import Trace

COMPUTE = "COMPUTE_REPORT.csv"
BANDWIDTH = "BANDWIDTH_REPORT.csv"
DETAILED = "DETAILED_ACCESS_REPORT.csv"
REPORT_MAX_BYTES = 64 * 2**20
COMPUTE_COLUMNS = (
    "LayerID",
    "Total Cycles (incl. prefetch)",
    "Total Cycles",
    "Stall Cycles",
    "Overall Util %",
    "Mapping Efficiency %",
    "Compute Util %",
)
BANDWIDTH_COLUMNS = (
    "Avg IFMAP SRAM BW",
    "Avg FILTER SRAM BW",
    "Avg OFMAP SRAM BW",
    "Avg IFMAP DRAM BW",
    "Avg FILTER DRAM BW",
    "Avg OFMAP DRAM BW",
)
#: DETAILED_ACCESS_REPORT's DRAM streams: (column prefix, the event's label).
DRAM_STREAMS = (
    ("DRAM IFMAP", "Reads", "IFMAP read"),
    ("DRAM Filter", "Reads", "filter read"),
    ("DRAM OFMAP", "Writes", "OFMAP write"),
)
DEVICE = "npu0"


def _folder(path: str | Path) -> Path:
    p = Path(path)
    return p.parent if p.name == COMPUTE else p


def is_scalesim(path: str | Path) -> bool:
    """A SCALE-Sim report folder (holding COMPUTE_REPORT.csv) or that file itself."""
    return (_folder(path) / COMPUTE).is_file()


def _table(path: Path, need: tuple[str, ...]) -> list[dict[str, float]]:
    """Rows of one report as {column: number}; InputError naming the file on anything malformed."""
    try:
        text = read_bounded(path, REPORT_MAX_BYTES).decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(path, "not a SCALE-Sim report (not UTF-8 text)") from None
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        raise InputError(path, "empty SCALE-Sim report")
    header = [h.strip() for h in rows[0]]
    missing = [c for c in need if c not in header]
    if missing:
        raise InputError(path, f"not a SCALE-Sim report: no column {missing[0]!r} (header: {', '.join(header[:4])}...)")
    out = []
    for line_no, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        rec = {}
        for c in need:
            i = header.index(c)
            cell = row[i].strip() if i < len(row) else ""
            try:
                rec[c] = float(cell)
            except ValueError:
                raise InputError(path, f"line {line_no}: {c} is {cell!r}, not a number") from None
            if not np.isfinite(rec[c]):
                raise InputError(path, f"line {line_no}: {c} is {cell!r}, not a finite number")
        out.append(rec)
    if not out:
        raise InputError(path, "SCALE-Sim report with a header but no layers")
    return out


def _by_layer(rows: list[dict[str, float]], path: Path, layers: list[int]) -> dict[int, dict[str, float]]:
    got = {int(r["LayerID"]): r for r in rows}
    if sorted(got) != sorted(layers):
        raise InputError(path, f"layers {sorted(got)} do not match {COMPUTE}'s {sorted(layers)}")
    return got


def _config(folder: Path) -> dict[str, str]:
    cfgs = sorted(folder.glob("*.cfg"))
    if len(cfgs) != 1:
        return {}
    cp = configparser.ConfigParser()
    try:
        cp.read_string(read_bounded(cfgs[0], 2**20).decode("utf-8", "replace"))
        arch = cp["architecture_presets"]
        return {"array": f"{int(arch['ArrayHeight'])}x{int(arch['ArrayWidth'])}", "dataflow": arch["Dataflow"].strip()}
    except (configparser.Error, KeyError, ValueError):
        return {}


def _layer_names(folder: Path, n: int) -> list[str]:
    """Names from the one topology CSV in the folder (first column, header 'Layer...'), if any."""
    reports = {COMPUTE, BANDWIDTH, DETAILED, "SPARSE_REPORT.csv"}
    for f in sorted(folder.glob("*.csv")):
        if f.name in reports:
            continue
        try:
            rows = [r for r in csv.reader(io.StringIO(read_bounded(f, 2**20).decode("utf-8", "replace"))) if r]
        except InputError:
            continue
        if rows and rows[0][0].strip().lower().startswith("layer") and len(rows) - 1 == n and "IFMAP" not in rows[0][1]:
            return [r[0].strip() for r in rows[1:]]
    return [f"layer{i}" for i in range(n)]


def load_scalesim(path: str | Path, clock_hz: float = 1e9) -> Trace:
    """The Trace of a SCALE-Sim report folder (see the module docstring)."""
    folder = _folder(path)
    if not (folder / COMPUTE).is_file():
        raise InputError(folder, f"not a SCALE-Sim report folder: no {COMPUTE}")
    compute = _table(folder / COMPUTE, COMPUTE_COLUMNS)
    layers = [int(r["LayerID"]) for r in compute]
    if len(set(layers)) != len(layers):
        raise InputError(folder / COMPUTE, "a LayerID appears twice")
    for r in compute:
        if r["Total Cycles"] < 0 or r["Total Cycles (incl. prefetch)"] < r["Total Cycles"]:
            raise InputError(
                folder / COMPUTE, f"layer {int(r['LayerID'])}: cycles are negative or prefetch below compute"
            )
    bw = (
        _by_layer(_table(folder / BANDWIDTH, ("LayerID", *BANDWIDTH_COLUMNS)), folder / BANDWIDTH, layers)
        if (folder / BANDWIDTH).is_file()
        else {}
    )
    dram_cols = tuple(f"{p} {x}" for p, what, _ in DRAM_STREAMS for x in ("Start Cycle", "Stop Cycle", what))
    detail = (
        _by_layer(_table(folder / DETAILED, ("LayerID", *dram_cols)), folder / DETAILED, layers)
        if (folder / DETAILED).is_file()
        else {}
    )
    names = _layer_names(folder, len(layers))
    ns = 1e9 / clock_hz
    events: list[dict] = []
    counters: list[dict] = []
    cursor = 0.0  # cycles
    for i, r in enumerate(compute):
        lid = int(r["LayerID"])
        d = detail.get(lid, {})
        prefetch = -min([d.get(f"{p} Start Cycle", 0.0) for p, _, _ in DRAM_STREAMS] + [0.0])
        origin = cursor + prefetch
        base = {"rank": 0, "device": DEVICE, "source": "simulator", "cat": "scalesim", "step": -1}
        start = round(origin * ns)
        dur = round(r["Total Cycles"] * ns)
        events.append(
            {
                **base,
                "name": names[i],
                "kind": Kind.KERNEL.value,
                "ts": start,
                "dur": dur,
                "track": f"rank0/{DEVICE}/array",
                "stream": 0,
            }
        )
        for prefix, what, label in DRAM_STREAMS:
            if not d:
                break
            a, b, words = d[f"{prefix} Start Cycle"], d[f"{prefix} Stop Cycle"], d[f"{prefix} {what}"]
            if b > a and words > 0:
                events.append(
                    {
                        **base,
                        "name": f"DRAM {label}, {int(words)} words",
                        "kind": Kind.MEMCPY.value,
                        "ts": round((origin + a) * ns),
                        "dur": round((b - a) * ns),
                        "track": f"rank0/{DEVICE}/{prefix.lower().replace(' ', '_')}",
                        "stream": 1,
                    }
                )
        samples = {
            "compute_util (%)": r["Compute Util %"],
            "mapping_efficiency (%)": r["Mapping Efficiency %"],
            "stall_cycles (cycles)": r["Stall Cycles"],
        }
        samples.update(
            {
                f"{c.removeprefix('Avg ').lower().replace(' ', '_')} (words/cycle)": v
                for c, v in bw.get(lid, {}).items()
                if c != "LayerID"
            }
        )
        for name, value in samples.items():
            track = "bandwidth" if "words/cycle" in name else "array"
            counters.append(
                {
                    "track": f"rank0/{DEVICE}/{track}",
                    "rank": 0,
                    "device": DEVICE,
                    "ts": start,
                    "name": name,
                    "value": value,
                }
            )
            counters.append(
                {
                    "track": f"rank0/{DEVICE}/{track}",
                    "rank": 0,
                    "device": DEVICE,
                    "ts": start + dur,
                    "name": name,
                    "value": 0.0,
                }
            )
        cursor += r["Total Cycles (incl. prefetch)"]
    events.sort(key=lambda e: (e["ts"], e["track"]))
    for k, e in enumerate(events):
        e["id"] = k
    ev = table(events, EVENT_COLUMNS)
    co = table(counters, COUNTER_COLUMNS).sort_values(["track", "name", "ts"], kind="stable").reset_index(drop=True)
    cfg = _config(folder)
    label = f"SCALE-Sim systolic array {cfg['array']} ({cfg['dataflow']})" if cfg else "SCALE-Sim systolic array"
    devices = table([{"rank": 0, "device": DEVICE, "name": label}], DEVICE_COLUMNS)
    metadata = {
        "files": [str(folder / f) for f in (COMPUTE, BANDWIDTH, DETAILED) if (folder / f).is_file()],
        "format": "scalesim",
        "framework": "SCALE-Sim report" + (f", array {cfg['array']}, dataflow {cfg['dataflow']}" if cfg else ""),
        "clock_hz": clock_hz,
        "clock_note": "SCALE-Sim reports cycles and has no clock: ns = cycles x 1e9 / clock_hz"
        + (" (1 GHz: 1 cycle = 1 ns, assumed)" if clock_hz == 1e9 else ""),
        **cfg,
    }
    trace = Trace(events=ev, counters=co, flows=table([], FLOW_COLUMNS), devices=devices, metadata=metadata)
    return redact_trace(trace).validate()  # layer names come from the user's topology file
