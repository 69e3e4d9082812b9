"""SCALE-Sim (the PyPI `scalesim` package, run as a whole process in benchmarks/.venv-scalesim;
`bash benchmarks/setup_scalesim_env.sh` creates it) against our closed forms
(accelerator/sim/timing.gemm_cycles) on the same GEMM layers: SCALE-Sim's compute cycles
("Total Cycles" of COMPUTE_REPORT.csv) beside ours, and the ratio.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_scalesim.py [--array 32x16] [--keep DIR]

`--keep DIR` copies SCALE-Sim's report folder of each dataflow (the three CSVs plus its inputs)
to DIR/<dataflow>/: how tests/data/scalesim/ was made.
"""

from __future__ import annotations

import argparse
import csv
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from accelerator.sim.timing import DATAFLOWS, gemm_cycles

HERE = Path(__file__).resolve().parent
PY = HERE / ".venv-scalesim" / "bin" / "python"
#: (name, M, N, K): multiples of the array and not, small enough for SCALE-Sim's cycle-level run.
LAYERS = [("g64", 64, 64, 64), ("g100x33x65", 100, 33, 65), ("g128x48x40", 128, 48, 40), ("g7x200x19", 7, 200, 19)]
LAYOUT_HEADER = (
    "Layer name,IFMAP Height Intraline Factor,IFMAP Width Intraline Factor,Filter Height Intraline Factor,"
    "Filter Width Intraline Factor,Channel Intraline Factor,Num Filter Intraline Factor,IFMAP Height Intraline Order,"
    "IFMAP Width Intraline Order,Channel Intraline Order,IFMAP Height Interline Order,IFMAP Width Interline Order,"
    "Channel Interline Order,Num Filter Intraline Order,Channel Intraline Order,Filter Height Intraline Order,"
    "Filter Width Intraline Order,Num Filter Interline Order,Channel Interline Order,Filter Height Interline Order,"
    "Filter Width Interline Order,"
)
CONFIG = """[general]
run_name = gemm_{df}

[architecture_presets]
ArrayHeight:    {rows}
ArrayWidth:     {cols}
IfmapSramSzkB:    6144
FilterSramSzkB:   6144
OfmapSramSzkB:    2048
IfmapOffset:    0
FilterOffset:   10000000
OfmapOffset:    20000000
Bandwidth : 10
Dataflow : {df}
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 10
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 10
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport : false
SparseRep : ellpack_block
OptimizedMapping : false
BlockSize : 8
RandomNumberGeneratorSeed : 40

[run_presets]
InterfaceBandwidth: CALC
UseRamulatorTrace: False
"""


def write_inputs(folder: Path, df: str, rows: int, cols: int) -> None:
    (folder / "scale.cfg").write_text(CONFIG.format(df=df, rows=rows, cols=cols))
    (folder / "gemm.csv").write_text("Layer, M, N, K,\n" + "".join(f"{n}, {m}, {nn}, {k},\n" for n, m, nn, k in LAYERS))
    (folder / "layout.csv").write_text(
        LAYOUT_HEADER + "\n" + "".join(f"{n},1,1,1,1,1,1,0,1,2,0,1,2,0,1,2,3,0,1,2,3,\n" for n, *_ in LAYERS)
    )


def run_scalesim(folder: Path, df: str) -> tuple[Path, float]:
    """Run SCALE-Sim on folder's inputs; (its report folder, wall seconds of the whole process)."""
    cmd = [
        str(PY),
        "-m",
        "scalesim.scale",
        "-c",
        "scale.cfg",
        "-t",
        "gemm.csv",
        "-l",
        "layout.csv",
        "-p",
        "out",
        "-i",
        "gemm",
        "-s",
        "N",
    ]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode:  # its progress bars go to stderr: show them only on failure
        raise SystemExit(f"scalesim failed ({done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
    return folder / "out" / f"gemm_{df}", time.perf_counter() - t0


def perf_simulate_seconds(layers: list, rows: int, cols: int, df: str) -> float:
    """Wall seconds of `perf simulate --gemm ... --json`, one whole process per layer, in all."""
    root = HERE.parent
    t0 = time.perf_counter()
    for _, m, n, k in layers:
        cmd = [sys.executable, "-m", "profiler", "simulate", "--gemm", f"{m}x{n}x{k}", "--array", f"{rows}x{cols}"]
        subprocess.run([*cmd, "--dataflow", df, "--json"], cwd=root, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--array", default="32x16", help="RxC of the systolic array (default 32x16)")
    ap.add_argument("--keep", type=Path, help="copy each dataflow's report folder to KEEP/<dataflow>/")
    a = ap.parse_args()
    if not PY.exists():
        print(f"no {PY}: run bash benchmarks/setup_scalesim_env.sh first", file=sys.stderr)
        return 2
    rows, cols = (int(x) for x in a.array.lower().split("x"))
    version = subprocess.run(
        [str(PY), "-c", "from importlib.metadata import version; print(version('scalesim'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    print(f"scalesim {version}, array {rows}x{cols}; cycles: COMPUTE_REPORT 'Total Cycles' vs timing.gemm_cycles")
    print(f"{'dataflow':8} {'layer':12} {'M':>5} {'N':>5} {'K':>5} {'scalesim':>9} {'ours':>9} {'ratio':>7}")
    worst = 0.0
    for df in DATAFLOWS:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            write_inputs(folder, df, rows, cols)
            report, wall = run_scalesim(folder, df)
            with open(report / "COMPUTE_REPORT.csv", newline="") as fh:
                got = [int(float(r[" Total Cycles"])) for r in csv.DictReader(fh)]
            for (name, m, n, k), theirs in zip(LAYERS, got, strict=True):
                ours = gemm_cycles(m, n, k, rows, cols, df)
                worst = max(worst, abs(ours / theirs - 1))
                print(f"{df:8} {name:12} {m:5} {n:5} {k:5} {theirs:9} {ours:9} {ours / theirs:7.4f}")
            ours_wall = perf_simulate_seconds(LAYERS, rows, cols, df)
            print(
                f"  {df}: whole processes for {len(LAYERS)} layers: scalesim {wall:.2f} s, "
                f"perf simulate --gemm (one process a layer) {ours_wall:.2f} s"
            )
            if a.keep:
                dest = a.keep / df
                dest.mkdir(parents=True, exist_ok=True)
                for f in ("COMPUTE_REPORT.csv", "BANDWIDTH_REPORT.csv", "DETAILED_ACCESS_REPORT.csv"):
                    shutil.copy(report / f, dest / f)
                for f in ("scale.cfg", "gemm.csv", "layout.csv"):
                    shutil.copy(folder / f, dest / f)
    print(f"largest |ours/scalesim - 1|: {worst:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
