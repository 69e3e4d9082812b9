"""How close ops recorded here run to the ceilings `perf calibrate` measures here: a 2048^3
matmul (compute bound) and 64M-element add and mul (memory bound), best of five calls each,
floored on the calibrated spec. On a quiet machine the matmul reaches 0.5..1.05 of the peak the
calibration saw (the same kernel), the elementwise ops near the triad bandwidth.

    .venv/bin/python benchmarks/bench_roofline_cpu.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from profiler import analyze, load_trace
from profiler.calibrate import Sizes, calibrate
from profiler.model.hardware import save_spec


def record(path: Path, fn, steps: int) -> Path:
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(steps):
            fn()
    prof.export_chrome_trace(str(path))
    return path


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        spec = save_spec(calibrate(Sizes(repeats=8), links=False)[0], Path(d) / "here.yaml")
        a_, b_ = torch.randn(2048, 2048), torch.randn(2048, 2048)
        n = 64 * 2**20
        x, y = torch.randn(n), torch.randn(n)
        torch.mm(a_, b_)
        cases = {
            "aten::mm": lambda: torch.mm(a_, b_),
            "aten::add": lambda: torch.add(x, y),
            "aten::mul": lambda: torch.mul(x, y),
        }
        for name, fn in cases.items():
            a = analyze(load_trace(record(Path(d) / "t.json", fn, 5)), hardware=str(spec))
            u = a.units[a.units["name"] == name]
            print(
                f"{name:10} bound {u['bound'].iloc[0]:8} best efficiency {u['efficiency'].max():.2f} "
                f"(floor {u['floor_ns'].iloc[0] / 1e6:.2f} ms, fastest {u['time_ns'].min() / 1e6:.2f} ms)"
            )


if __name__ == "__main__":
    main()
