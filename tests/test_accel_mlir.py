"""The program as MLIR text of the npu dialect: well formed (xDSL parses it and prints the same
text), one npu op per program op with its types, dynamic dims and source location."""

from __future__ import annotations

import pytest
from accel_programs import compiled, decomposed

from accelerator.compiler.mlir import op_class, op_name, parse_mlir, print_module, to_mlir


@pytest.mark.parametrize(
    "name,preset,policy",
    [("llama", "edge-npu", "int8"), ("llama", "datacenter-npu", "bf16"), ("mlp", "datacenter-npu", "fp8")],
)
def test_print_parse_print_round_trip(name, preset, policy):
    program = compiled(name, preset, policy).program
    text = to_mlir(program)
    module = parse_mlir(text)
    assert print_module(module) == text
    npu_ops = [op for op in module.walk() if op.name.startswith("npu.")]
    # every program op is one registered npu op (not an unregistered placeholder), in order
    assert [op.name for op in npu_ops] == [op_name(o.target) for o in program.ops]
    assert all(isinstance(op, op_class(op.name)) for op in npu_ops)


def test_text_carries_types_dynamic_dims_and_locations():
    program = compiled("llama", "datacenter-npu", "bf16").program
    text = to_mlir(program)
    line = next(
        i for i, t in enumerate(open("accelerator/workloads/llama.py"), 1) if "scaled_dot_product_attention(" in t
    )
    sdpa = next(t for t in text.splitlines() if '"npu.scaled_dot_product_attention"' in t)
    # batch 1, 4 heads, dynamic sequence, head_dim 16; bf16 operands; the module path around file:line
    assert "tensor<1x4x?x16xbf16>" in sdpa and "tensor<1x2x32x16xbf16>" in sdpa  # q, and the bf16 KV cache
    assert sdpa.endswith(f'loc("layers.0.attn"("accelerator/workloads/llama.py":{line}:0))')
    assert 'kwargs = "enable_gqa=True"' in sdpa and 'unit = "matrix"' in sdpa
    mm = next(t for t in text.splitlines() if t.strip().startswith("%mm ="))
    assert '"npu.mm"' in mm and 'accumulate = "float32"' in mm and "tensor<?x64xbf16>" in mm


def test_unlegalised_program_prints_too():
    text = to_mlir(decomposed("mlp"))
    assert print_module(parse_mlir(text)) == text
    assert text.count('"npu.addmm"') == 2 and "unit =" not in text


def test_multi_result_ops_print_all_results():
    # inference batch norm returns (out, mean, invstd): 3 results; the program's getitem of
    # result 0 is that result's SSA value, so the 6 BN ops (3 results each) and no getitem appear
    program = compiled("resnet", "datacenter-npu", "bf16").program
    text = to_mlir(program)
    bn = [t for t in text.splitlines() if '"npu._native_batch_norm_legit_no_training"' in t]
    assert len(bn) == 6 and all(t.split(" = ")[0].count("%") == 3 for t in bn)
    assert '"npu.getitem"' not in text
    assert print_module(parse_mlir(text)) == text
