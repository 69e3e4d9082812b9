"""Every layer's output on both sides of a numerical diff.

- eager (the reference): collectors.torch_runtime.layer_outputs (a forward hook per submodule).
- ONNX Runtime (the candidate): each module's output tensor (`export.module_outputs`, from the fp32
  export) is made a graph output and read back. In a QDQ model the tensor is read after its
  QuantizeLinear -> DequantizeLinear pair when it has one: the value the next layer consumes,
  compared after dequantization. A layer whose tensor the candidate no longer has (fused away by
the quantizer) is not compared. Graph optimisation is off so that no tensor is fused away (QDQ
  then runs as fake quantization in fp32, the format's reference semantics).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from collectors.torch_runtime.layer_outputs import eager_outputs

__all__ = ["dequantized", "eager_outputs", "ort_outputs"]


def dequantized(model: onnx.ModelProto, tensor: str) -> str:
    """The tensor after `tensor`'s QuantizeLinear -> DequantizeLinear pair, or `tensor` itself."""
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in model.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    for q in consumers.get(tensor, []):
        if q.op_type == "QuantizeLinear":
            for dq in consumers.get(q.output[0], []):
                if dq.op_type == "DequantizeLinear":
                    return dq.output[0]
    return tensor


def ort_outputs(
    path: Path,
    inputs: tuple[np.ndarray, ...],
    tensors: dict[str, str],
    session: Callable[[bytes, dict[str, np.ndarray]], Any] | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """(layer -> its output as fp32, the model's first output) from one ONNX Runtime run of the
    model at `path` with each wanted tensor (`tensors`: layer -> tensor name) exposed as an output:
    on the CPU EP, or on the session `session(model bytes, feeds)` makes (the QNN HTP's)."""
    import onnxruntime as ort

    model = onnx.load(str(path))
    made = {o for n in model.graph.node for o in n.output} | {i.name for i in model.graph.input}
    # A tensor the precision pass fused away (int8 folds a Relu into the Gemm before it) has no
    # counterpart: that layer is left out of the comparison.
    read = {layer: dequantized(model, t) for layer, t in tensors.items() if t in made}
    have = {o.name for o in model.graph.output}
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    for name in sorted(set(read.values()) - have):
        if name in types:
            model.graph.output.append(types[name])
        else:  # no inferred type: ONNX Runtime accepts an output declared by name only
            model.graph.output.append(onnx.ValueInfoProto(name=name))
    feeds = {i.name: a for i, a in zip(model.graph.input, inputs)}
    if session is None:
        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        opts.log_severity_level = 3
        run = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    else:
        run = session(model.SerializeToString(), feeds)
    names = [o.name for o in run.get_outputs()]
    values = dict(zip(names, run.run(names, feeds)))
    final = np.asarray(values[names[0]], dtype=np.float32)
    return {layer: np.asarray(values[t], dtype=np.float32) for layer, t in read.items() if t in values}, final
