"""Record the bundled example trace: a small MLP's training steps under torch.profiler (CPU).

    python examples/record_mlp_trace.py examples/traces/mlp_cpu.json.gz

Random weights, fixed seed; shapes recorded, three profiled steps after one warm-up.
"""

from __future__ import annotations

import sys

import torch
from torch.profiler import ProfilerActivity, profile, schedule


def main(out: str) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.LayerNorm(1024), torch.nn.Linear(1024, 256)
    )
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(64, 256), torch.randn(64, 256)
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        schedule=schedule(wait=0, warmup=1, active=3),
        on_trace_ready=lambda p: p.export_chrome_trace(out),
    ) as prof:
        for _ in range(4):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "examples/traces/mlp_cpu.json.gz")
