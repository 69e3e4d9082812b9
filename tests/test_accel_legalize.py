"""Legalisation: the unit each op runs on and its dtype against the hardware, an op the target
cannot run diagnosed with its op, module path and source line, and a model torch.export rejects."""

from __future__ import annotations

import pytest
import torch
from accel_programs import compiled

from accelerator.compiler.pipeline import CompileContext, compile_model
from accelerator.hardware import load_accel
from profiler.model.errors import InputError


def units(program):
    return {o.target: o.attrs["unit"] for o in program.ops}


def test_int8_mlp_units_on_the_edge():
    c = compiled("mlp", "edge-npu", "int8")
    u = units(c.program)
    assert u["npu.qmm"] == "matrix" and u["aten.permute.default"] == "dma"
    assert u["npu.quantize"] == u["npu.dequantize"] == u["aten.gelu.default"] == "vector"
    qmm = [o for o in c.program.ops if o.target == "npu.qmm"]
    assert {o.attrs["dtype"] for o in qmm} == {"int8"}
    gelu = next(o for o in c.program.ops if o.target == "aten.gelu.default")
    assert gelu.attrs["op_class"] == "exp"
    assert c.log[-1].decisions[-1].what == "ops per unit: dma 2, matrix 2, vector 7"


def test_fp32_matmul_moves_to_the_vector_unit_where_the_matrix_unit_has_no_fp32():
    edge = compiled("mlp", "edge-npu", "fp32")
    addmm = [o for o in edge.program.ops if o.target == "aten.addmm.default"]
    assert [o.attrs["unit"] for o in addmm] == ["vector", "vector"]
    assert any("matrix unit has no fp32" in d.why for d in edge.log[-1].decisions)
    dc = compiled("mlp", "datacenter-npu", "fp32")  # its matrix unit lists fp32 (multi-pass)
    assert [o.attrs["unit"] for o in dc.program.ops if o.target == "aten.addmm.default"] == ["matrix", "matrix"]


def test_bf16_llama_every_op_has_a_unit_and_the_cache_write_is_dma():
    p = compiled("llama", "datacenter-npu", "bf16").program
    assert all(o.attrs.get("unit") in ("matrix", "vector", "dma", "host") for o in p.ops)
    assert units(p)["aten.index_copy_.default"] == "dma"
    assert units(p)["aten.scaled_dot_product_attention.default"] == "matrix"
    host = [o.target for o in p.ops if o.attrs["unit"] == "host"]
    assert host == ["aten.sym_size.int"]  # the dynamic length, read on the host


class _Sorts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.head = _Head()

    def forward(self, x):
        return self.head(self.proj(x))


class _Head(torch.nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=-1).values  # no unit of the NPU sorts


def test_unsupported_op_names_op_module_and_line():
    x = torch.randn(2, 8)
    line = next(i for i, t in enumerate(open(__file__), 1) if "torch.sort(x" in t)
    where = f"tests/test_accel_legalize.py:{line}"
    c = compile_model(_Sorts(), (x,), load_accel("edge-npu"))
    sort = next(o for o in c.program.ops if o.target == "aten.sort.default")
    assert sort.attrs["unit"] == "host"
    assert sort.attrs["diagnostic"] == f"unsupported: aten.sort.default at head ({where})"
    with pytest.raises(InputError) as e:
        compile_model(_Sorts(), (x,), load_accel("edge-npu"), host_fallback=False)
    assert str(e.value) == f"{where}: aten.sort.default in head: no unit of edge-npu runs it and host fallback is off"


class _DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # control flow on a value: torch.export cannot trace it
            return x * 2
        return x


def test_a_model_export_rejects_is_one_line():
    with pytest.raises(InputError) as e:
        compile_model(_DataDependent(), (torch.randn(3),), load_accel("edge-npu"))
    msg = str(e.value)
    assert msg.startswith("_DataDependent: torch.export rejected the model: ") and "\n" not in msg


def test_pipeline_log_skip_and_override():
    from accel_programs import captured

    from accelerator.compiler.pipeline import Pipeline

    ctx = CompileContext(load_accel("edge-npu"), "bf16")
    seen = []

    def my_precision(program, ctx):
        seen.append(len(program.ops))
        return program

    pipe = Pipeline(capture=lambda m, a, c: captured("mlp"), override={"precision": my_precision}, skip=["legalize"])
    c = pipe.run(None, (), ctx)
    names = ["capture", "decompose", "precision", "legalize", "partition", "fusion", "tiling", "allocate", "schedule"]
    assert [row.name for row in c.log] == names
    # op counts chain: capture 3 (linear, gelu, linear) -> decompose 5 (2 permute, 2 addmm, gelu)
    assert [(r.ops_before, r.ops_after) for r in c.log] == [(0, 3), (3, 5)] + [(5, 5)] * 7
    assert seen == [5] and c.log[3].skipped and c.log[3].wall_ns == 0
    assert all(r.wall_ns > 0 for r in c.log[:3])
    assert not any("unit" in o.attrs for o in c.program.ops)  # legalisation did not run
    assert c.log[1].to_dict()["decisions"][0]["what"] == "kept aten.scaled_dot_product_attention.default whole"
    with pytest.raises(ValueError, match="no pass named tilling"):
        Pipeline(skip=["tilling"])
