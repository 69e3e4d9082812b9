"""One dtype table (profiler.model.dtypes) behind every reader of dtype names."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("spelling", "name", "size"),
    [
        ("c10::BFloat16", "bf16", 2),
        ("float", "fp32", 4),
        ("long int", "int64", 8),  # Kineto 'Input type'
        ("torch.float16", "fp16", 2),
        ("bfloat16", "bf16", 2),  # torch
        ("BFloat16", "bf16", 2),
        ("Float", "fp32", 4),
        ("Byte", "int8", 1),  # collective records
        ("f32", "fp32", 4),
        ("i64", "int64", 8),
        ("b8", "bool", 1),  # FX graphs
        ("float8_e4m3fn", "fp8", 1),
        ("no-such-type", None, None),
    ],
)
def test_one_dtype_table(spelling, name, size):
    from profiler.model.dtypes import dtype_name, element_bytes

    assert dtype_name(spelling) == name and element_bytes(spelling) == size


def test_every_reader_uses_the_model_dtype_table():
    """The cost model, the memory levels, the collectives' sizes, the FX reader and the hardware
    dtype names are views of profiler.model.dtypes, not copies that can drift apart."""
    from analysis import memory_levels
    from analysis.cost import base
    from collectors.torch_compile import graph_text
    from profiler.model import dtypes
    from profiler.model.hardware import normalize_dtype

    assert memory_levels.ELEMENT_BYTES is dtypes.ELEMENT_BYTES and base.SCALAR_TYPES is dtypes.SCALAR_TYPES
    assert all(base.DTYPES[k] == (v, dtypes.ELEMENT_BYTES[v]) for k, v in dtypes.KINETO.items())
    assert graph_text.DTYPE is dtypes.FX and graph_text.ITEMSIZE["bf16"] == 2
    assert normalize_dtype("c10::BFloat16") == "bf16" and normalize_dtype("int64") is None  # no int64 peak in a spec
