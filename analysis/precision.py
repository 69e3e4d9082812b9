"""TF32: fp32 matmuls and convolutions that ran on tensor cores at TF32 precision.

An fp32 GEMM, convolution or attention whose device work includes a TF32 tensor-core kernel
(cuBLAS/cuDNN/CUTLASS names carrying 'tf32', 's1688gemm', 's16816gemm', e.g.
'sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_...', 'ampere_tf32_s1688gemm_tf32_...'), or
any such op in a trace whose metadata says `allow_tf32` is true, is costed at dtype 'tf32':
its compute floor uses the TF32 matrix peak (HardwareSpec.peak falls back to fp32 where the
device has none, e.g. V100), and the by-dtype table shows TF32 as its own row. Bytes stay fp32's
(TF32 reads and writes 4-byte floats).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from profiler.model.schema import DEVICE_WORK_KINDS

#: Kernel names of TF32 tensor-core GEMMs and convolutions (cuBLAS, cuDNN, CUTLASS).
TF32_KERNEL = re.compile(r"tf32|s1688gemm|s16816gemm|s1688|s16816", re.IGNORECASE)
_MATRIX = ("gemm", "conv", "attention")


def with_tf32(
    events: pd.DataFrame, units: pd.DataFrame, costs: pd.DataFrame, metadata: dict | None = None
) -> pd.DataFrame:
    """`costs` (rows aligned with `units`) with dtype 'tf32' for fp32 matrix units that ran TF32
    kernels (or any, when the trace metadata says allow_tf32). Returns a copy."""
    out = costs.copy()
    fp32_matrix = (out["dtype"].to_numpy(dtype=object) == "fp32") & out["family"].isin(_MATRIX).to_numpy()
    if not fp32_matrix.any():
        return out
    gpu = units["device"].to_numpy(dtype=object) != "cpu"
    if _allows_tf32(metadata):
        hit = fp32_matrix & gpu
    else:
        work = events[events["kind"].isin([k.value for k in DEVICE_WORK_KINDS]).to_numpy()]
        names = work["name"].astype(object).to_numpy()
        codes, distinct = pd.factorize(names)
        is_tf32 = (
            np.array([bool(TF32_KERNEL.search(str(n))) for n in distinct], dtype=bool)[codes]
            if len(distinct)
            else np.zeros(0, bool)
        )
        op_ids = work["op_id"].to_numpy()
        tf32_units = set(op_ids[is_tf32 & (op_ids >= 0)].tolist()) | set(
            work["id"].to_numpy()[is_tf32 & (op_ids < 0)].tolist()
        )
        hit = fp32_matrix & units["unit_id"].isin(tf32_units).to_numpy()
    out.loc[hit, "dtype"] = "tf32"
    return out


def _allows_tf32(metadata: Any) -> bool:
    """True when any `allow_tf32` key in the trace metadata is set (recorded by a user or a tool)."""
    if isinstance(metadata, dict):
        for k, v in metadata.items():
            if "allow_tf32" in str(k).lower() and (v is True or str(v).lower() in ("true", "1")):
                return True
            if isinstance(v, (dict, list)) and _allows_tf32(v):
                return True
    elif isinstance(metadata, list):
        return any(_allows_tf32(v) for v in metadata)
    return False
