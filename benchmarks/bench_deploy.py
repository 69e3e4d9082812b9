"""Deployment targets: latency and output error of fp32, fp16, int8 and the best mixed plan on
ONNX Runtime CPU and the QNN HTP simulator, for a ResNet-style conv net and a small transformer;
then the time of the whole gate pipeline (`perf gate --config`, one process).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_deploy.py [--budget 0.02] [--trials 8] [--json-out FILE]
        [--models resnet,transformer] [--no-pipeline]

Latency (collectors/onnx/latency.py): ORT CPU with graph optimisation on, median of 20 runs
(wall ns); QNN HTP: median cycles per execute of 5 (warm-up left out) at the preset's ASSUMED
1 GHz clock. Error: normwise rel_error of the model output against eager fp32 on the seeded
inputs (analysis.numerics). int8 on QNN is int8-qnn (uint8 QDQ, get_qnn_qdq_config); calibration
is 8 random normal batches (seed 0). The mixed plan is `perf gate --split`'s best within --budget.
Ratios are latency / the same runtime's fp32 latency.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent  # models are named bench_deploy:<factory> (a site package is named benchmarks)


class BasicBlock(nn.Module):
    def __init__(self, c: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


class ResNetish(nn.Module):
    """Stem conv 3->32 stride 2, two basic blocks at 32 channels, global pool, fc 32->10 (1x3x64x64)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 32, 3, stride=2, padding=1)
        self.layer1 = BasicBlock(32)
        self.layer2 = BasicBlock(32)
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer2(self.layer1(torch.relu(self.stem(x))))
        return self.fc(x.mean(dim=(2, 3)))


class Block(nn.Module):
    """Pre-norm transformer block: single-head attention written out (q, k, v Linears,
    softmax(QK^T/sqrt d)V, proj) and an MLP 64->256->64 with GELU."""

    def __init__(self, d: int = 64):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        # three projections, not one qkv Linear and chunk: the exporter writes chunk as
        # SplitToSequence, which the QNN HTP lacks and onnxconverter-common's fp16 pass breaks
        self.q, self.k, self.v, self.proj = nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.d = d

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        q, k, v = self.q(h), self.k(h), self.v(h)
        a = torch.softmax(q @ k.transpose(-2, -1) / self.d**0.5, dim=-1) @ v
        x = x + self.proj(a)
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class TinyTransformer(nn.Module):
    """Two blocks, d_model 64, sequence 32 (input 1x32x64)."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


def resnet() -> ResNetish:
    torch.manual_seed(0)
    return ResNetish().eval()


def transformer() -> TinyTransformer:
    torch.manual_seed(0)
    return TinyTransformer().eval()


MODELS = {
    "resnet": ("bench_deploy:resnet", ["1x3x64x64"]),
    "transformer": ("bench_deploy:transformer", ["1x32x64"]),
}
RUNTIMES = {"onnxruntime": ("fp32", "fp16", "int8"), "qnn-sim": ("fp32", "fp16", "int8-qnn")}


def measure(spec: str, inputs: list[str], backend: str, precision: str, tmp: Path) -> dict:
    """Latency and output error of one variant; a refusal is recorded, not raised."""
    from analysis.numerics import layer_error
    from collectors.onnx.latency import ort_latency_ns, qnn_latency_ns
    from collectors.onnx.layers import eager_outputs, ort_outputs
    from collectors.torch_runtime.run_model import prepare
    from profiler.api.deploy import candidate_session, make_variant
    from profiler.model.errors import InputError

    try:
        cand, arrays, _ = make_variant(spec, inputs, precision, tmp)
        model, xs = prepare(spec, inputs, "fp32", False, eager_check=True)
        _, _, ref = eager_outputs(model.eval(), tuple(xs))
        _, out = ort_outputs(cand, arrays, {}, candidate_session(backend))
        ns = qnn_latency_ns(cand, arrays, label=spec) if backend == "qnn-sim" else ort_latency_ns(cand, arrays)
    except InputError as e:
        return {"latency_ns": None, "rel_error": None, "failure": e.problem}
    except Exception as e:  # noqa: BLE001 - a converter's invalid model: recorded as the result
        return {"latency_ns": None, "rel_error": None, "failure": f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"}
    return {"latency_ns": ns, "rel_error": layer_error("output", "", ref, out).rel_error, "failure": ""}


def best_plan(spec: str, inputs: list[str], backend: str, budget: float, trials: int, tmp: Path) -> dict:
    from profiler.cli.deploy_split import split_search

    precision = "int8-qnn" if backend == "qnn-sim" else "int8"
    tmp.mkdir(parents=True, exist_ok=True)
    r = split_search(spec, inputs, f"{backend}:{precision}", budget, tmp / f"{backend}.sqlite", trials=trials)
    if r.best is None:
        return {"latency_ns": None, "rel_error": None, "failure": f"no plan of {len(r.trials)} within {budget:g}"}
    return {
        "latency_ns": r.best.time_ns,
        "rel_error": r.best.accuracy_error,
        "failure": "",
        "plan_fp32": sorted(r.plan(r.best)),
        "strategy": r.strategy,
        "trials": len(r.trials),
    }


def pipeline_seconds(tmp: Path) -> float:
    """`perf gate --config` (accuracy + latency on qnn-sim, 3 runs of 5 steps against a baseline
    of 3 runs profiled just before) as one process: its wall seconds."""
    spec, inputs = MODELS["resnet"]
    from profiler.api.deploy_gates import profile_candidate

    profile_candidate(spec, inputs, "qnn-sim", tmp / "baseline", repeats=3, steps=5)
    cfg = tmp / "gates.toml"
    cfg.write_text(
        f'[model]\nfactory = "{spec}"\ninput = ["{inputs[0]}"]\n[candidate]\ntarget = "qnn-sim:int8-qnn"\n'
        f'[accuracy]\nbudget = 0.1\n[latency]\nbaseline = "baseline"\nrepeats = 3\nsteps = 5\n'
    )
    t0 = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), str(HERE), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run(
        [sys.executable, "-m", "profiler", "gate", "--config", str(cfg), "--json"], capture_output=True, env=env
    )
    seconds = time.perf_counter() - t0
    doc = json.loads(r.stdout or b"{}")
    print(
        f"gate pipeline: {seconds:.1f} s wall, exit {r.returncode}, passed {doc.get('passed')}, "
        f"stages {doc.get('seconds')}"
    )
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=0.02)
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--json-out", type=Path)
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated: resnet, transformer")
    ap.add_argument("--no-pipeline", action="store_true", help="skip the gate pipeline's timing")
    args = ap.parse_args()
    results: dict = {}
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        for name, (spec, inputs) in MODELS.items():
            if name not in args.models.split(","):
                continue
            for backend, precisions in RUNTIMES.items():
                for precision in precisions:
                    d = tmp / f"{name}-{backend}-{precision}"
                    d.mkdir()
                    results[f"{name} {backend} {precision}"] = measure(spec, inputs, backend, precision, d)
                results[f"{name} {backend} mixed"] = best_plan(
                    spec, inputs, backend, args.budget, args.trials, tmp / name
                )
        try:
            if not args.no_pipeline:
                results["gate pipeline seconds"] = pipeline_seconds(tmp)
        except Exception as e:  # noqa: BLE001 - the figures above are kept
            print(f"gate pipeline: failed: {type(e).__name__}: {e}")
    print(f"{'model runtime precision':40} {'latency µs':>12} {'x fp32':>7} {'rel_error':>10}  note")
    for key, r in results.items():
        if not isinstance(r, dict):
            continue
        fp32 = results.get(" ".join(key.split()[:2]) + " fp32", {}).get("latency_ns")
        lat = r["latency_ns"]
        ratio = f"{lat / fp32:.2f}" if lat and fp32 else "-"
        note = r["failure"] or (
            f"fp32: {', '.join(r['plan_fp32']) or 'none'} ({r['strategy']}, {r['trials']} plans)"
            if "plan_fp32" in r
            else ""
        )
        err = f"{r['rel_error']:.3g}" if r["rel_error"] is not None else "-"
        print(f"{key:40} {lat / 1e3 if lat else float('nan'):12.1f} {ratio:>7} {err:>10}  {note}")
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
