"""Inference latency of an ONNX model, as a deployment would see it (the graph search of
profiler/api/deploy_split.py measures each plan with it).

- onnxruntime: the CPU EP with every graph optimisation on (ORT fuses a QDQ pattern into its
  int8 kernels, QLinearConv / QGemm: the deployed int8 speed, unlike the profiler's run with
  optimisation off), `warmup` runs then the median wall time of `runs` runs (time.perf_counter_ns).
- qnn-sim: the HTP's cycles per execute from the QNN profile (collectors/onnx/qnn.py; warm-up
  execute left out), their median, as ns at the preset's assumed clock (qnn_trace.HTP_CLOCK_HZ).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def ort_latency_ns(model: Path, inputs: tuple[np.ndarray, ...], *, runs: int = 20, warmup: int = 3) -> float:
    """Median wall time (ns) of one inference on ORT's CPU EP, graph optimisation on."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    feeds = {i.name: a for i, a in zip(session.get_inputs(), inputs)}
    for _ in range(warmup):
        session.run(None, feeds)
    times = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        session.run(None, feeds)
        times.append(time.perf_counter_ns() - t0)
    return float(statistics.median(times))


def qnn_latency_ns(model: Path, inputs: tuple[np.ndarray, ...], *, runs: int = 5, label: str = "") -> float:
    """Median HTP time (ns) of one execute on the QNN HTP simulator (its cycles at the assumed clock)."""
    from collectors.onnx.qnn import profile_qnn
    from collectors.onnx.qnn_trace import HTP_CLOCK_HZ, load_qnn_profile

    with tempfile.TemporaryDirectory() as tmp:
        t = load_qnn_profile(profile_qnn(model, inputs, Path(tmp) / "p.json", runs=runs, label=label))
    return float(statistics.median(t.metadata["run_cycles"])) * 1e9 / HTP_CLOCK_HZ
