"""Capture and decomposition: module paths and source lines kept, attention whole, the KV-cache
update in place (by op count, by the bytes it moves and by the storage it writes), Q/DQ ops
surviving decomposition."""

from __future__ import annotations

import copy

import torch
from accel_programs import captured, decomposed, workload

from accelerator.compiler.capture import capture
from accelerator.compiler.decompose import decompose
from accelerator.compiler.execute import run
from accelerator.compiler.pipeline import CompileContext
from accelerator.hardware import load_accel
from accelerator.workloads import LlamaConfig

CFG = LlamaConfig()


def test_capture_keeps_module_path_source_line_and_a_dynamic_sequence():
    p = captured("llama")
    tokens, pos = (i for i in p.inputs if i.kind == "user")
    # Dim.AUTO: the sequence length stays dynamic (one symbol shared by tokens and positions);
    # batch 1 is specialised by export (0/1 specialisation)
    assert tokens.type.shape[0] == 1 and isinstance(tokens.type.shape[1], str)
    assert pos.type.shape == (tokens.type.shape[1],)
    sdpa = [o for o in p.ops if o.target == "aten.scaled_dot_product_attention.default"]
    assert [o.module for o in sdpa] == ["layers.0.attn", "layers.1.attn"]
    line = next(
        i for i, t in enumerate(open("accelerator/workloads/llama.py"), 1) if "scaled_dot_product_attention(" in t
    )
    assert all(o.source == f"accelerator/workloads/llama.py:{line}" for o in sdpa)
    # nn.Linear's op points at the model line that called the module, not at torch's linear.py
    q_proj = next(o for o in p.ops if o.module == "layers.0.attn.q_proj")
    assert q_proj.source.startswith("accelerator/workloads/llama.py:")


def test_decomposition_to_core_aten_keeps_attention_whole():
    c = decomposed("llama").op_counts()
    # 2 layers x (q, k, v, o, gate, up, down) + lm_head = 15 matmuls, every linear an mm
    assert c["aten.mm.default"] == 15 and "aten.linear.default" not in c
    assert c["aten.scaled_dot_product_attention.default"] == CFG.n_layers
    assert not {"aten._softmax.default", "aten.bmm.default", "aten._safe_softmax.default"} & set(c)
    assert c["aten.mean.dim"] == 2 * CFG.n_layers + 1  # RMSNorm statistics: 2 per layer + the final norm
    mlp = decomposed("mlp").op_counts()
    assert dict(mlp) == {"aten.permute.default": 2, "aten.addmm.default": 2, "aten.gelu.default": 1}


def test_kv_cache_update_is_an_in_place_write_of_the_new_rows():
    p = decomposed("llama")
    updates = [o for o in p.ops if o.target == "aten.index_copy_.default"]
    assert len(updates) == 2 * CFG.n_layers  # k and v per layer
    assert not {"aten.index_copy.default", "aten.index_put.default"} & set(p.op_counts())
    assert not [o for o in p.outputs if o.kind == "buffer"]  # no whole-cache write-back
    types, inputs = p.types(), {i.name: i for i in p.inputs}
    for u in updates:
        cache, src = inputs[u.args[0].name], types[u.args[3].name]
        assert cache.kind == "buffer" and cache.target.endswith(("k_cache", "v_cache"))
        # bytes the update moves: the 8 new rows (1 x 2 kv heads x 8 x 16 x 4 B = 1024 B),
        # a quarter of the 32-row cache (4096 B) a functional copy would write
        assert src.numel * 4 == 1 * CFG.n_kv_heads * 8 * CFG.head_dim * 4 == 1024
        assert cache.type.numel * 4 == 4096
    # and it writes the cache's own storage
    model, inputs_ = workload("llama")
    state = {k: v.clone() for k, v in p.state.items()}
    _, env = run(p, inputs_, state=state)
    assert all(env[u.name].data_ptr() == state[u.args[0].name].data_ptr() for u in updates)


def test_decode_after_prefill_reads_the_cache_the_prefill_wrote():
    model, (tokens, pos) = workload("llama")
    p = decomposed("llama")
    eager = copy.deepcopy(model)
    state = {k: v.clone() for k, v in p.state.items()}
    run(p, (tokens, pos), state=state)
    eager(tokens, pos)
    step = (torch.tensor([[5]]), torch.tensor([8]))  # one token at position 8
    (out,), _ = run(p, step, state=state)
    with torch.no_grad():
        ref = eager(*step)
    assert out.shape == (1, 1, CFG.vocab)
    assert float((out - ref).norm() / ref.norm()) < 1e-5


class _Int8Linear(torch.nn.Module):
    """A PT2E-style quantized linear: quantize/dequantize ops around an int8 weight."""

    def __init__(self):
        super().__init__()
        import torch.ao.quantization.fx._decomposed  # noqa: F401

        torch.manual_seed(0)
        self.register_buffer("w", torch.randint(-127, 128, (16, 32), dtype=torch.int8))

    def forward(self, x):
        q = torch.ops.quantized_decomposed
        xq = q.quantize_per_tensor.default(x, 0.05, 0, -128, 127, torch.int8)
        xd = q.dequantize_per_tensor.default(xq, 0.05, 0, -128, 127, torch.int8)
        wd = q.dequantize_per_tensor.default(self.w, 0.01, 0, -128, 127, torch.int8)
        return torch.nn.functional.linear(xd, wd)


def test_quantize_dequantize_pairs_survive_decomposition():
    ctx = CompileContext(load_accel("edge-npu"))
    x = torch.randn(4, 32)
    p = decompose(capture(_Int8Linear(), (x,), ctx), ctx)
    c = p.op_counts()
    assert c["quantized_decomposed.quantize_per_tensor.default"] == 1
    assert c["quantized_decomposed.dequantize_per_tensor.default"] == 2
    # the matmul reads the dequantized int8 tensors directly: both operands trace back to int8
    # through a dequantize (and the weight's transpose), not to fp32 arithmetic
    prod, types = p.producers(), p.types()
    mm = next(o for o in p.ops if o.target == "aten.mm.default")
    for ref in mm.refs():
        op = prod[ref]
        while op.target == "aten.permute.default":
            op = prod[op.args[0].name]
        assert op.target == "quantized_decomposed.dequantize_per_tensor.default"
        assert types[op.args[0].name].dtype == "int8"
    (out,), _ = run(p, (x,))
    assert float((out - _Int8Linear()(x)).norm()) == 0.0


def test_a_quantized_linear_runs_as_int8_arithmetic_after_precision():
    """The surviving dequantize -> mm is folded into int8 x int8 -> int32 (npu.qmm) under any
    policy, and computes the same numbers: the int8 linear does not come out as fp32 arithmetic."""
    from accelerator.compiler.precision import assign_precision

    ctx = CompileContext(load_accel("edge-npu"))
    x = torch.randn(4, 32)
    model = _Int8Linear()
    p = assign_precision(decompose(capture(model, (x,), ctx), ctx), ctx)
    c, types = p.op_counts(), p.types()
    assert "aten.mm.default" not in c and c["npu.qmm"] == 1
    assert "quantized_decomposed.dequantize_per_tensor.default" not in c  # both dequantizes folded away
    qmm = next(o for o in p.ops if o.target == "npu.qmm")
    assert [types[r].dtype for r in qmm.refs()] == ["int8", "int8"] and types[qmm.name].dtype == "int32"
    (out,), _ = run(p, (x,))
    ref = model(x)
    # same arithmetic up to fp32 rounding: sum of int products x (0.05 x 0.01) vs sum of scaled products
    assert float((out - ref).norm() / ref.norm()) < 1e-6
