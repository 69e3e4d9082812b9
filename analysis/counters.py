"""Measured FLOPs by precision and bytes by memory level, per kernel launch, from hardware counters
(profiler.model.kernel_counters). docs/counters.md has every formula with its source.

NVIDIA (Nsight Compute, CUPTI; thread-level SASS instruction counts, predicated-on threads):

    fp64 vector = dadd + dmul + 2 * dfma        fp32 vector = fadd + fmul + 2 * ffma
    fp16 vector = hadd + hmul + 2 * hfma        (an FMA is two FLOPs: Nsight Compute's roofline
                                                 sections, SpeedOfLight_RooflineChart.section)
    tensor      = (sm__inst_executed_pipe_tensor - hfma / 32) * FLOPs per MMA instruction

On GA100 the tensor-pipe count includes the FP16 FMA instructions (warp-level: in both A100
samples every elementwise kernel has pipe_tensor = ceil(hfma / 32) exactly), so they are taken
out; what is left counts as MMA only when it is more than half the pipe's instructions (the fp32
softmax of the eager sample leaves 60 of 160 that are not MMA; GEMM kernels leave all of theirs).
An MMA instruction on sm_80 and later is mma.m16n8k16 for fp16/bf16, 2*16*8*16 = 4096 FLOPs
(PTX ISA, "Matrix shape" of mma; checked on the flash-attn sample: the fused QKV GEMM of
40 x 256 by 256 x 768, its 40 rows padded to the 64 of its two 32-row tiles, runs
6,144 instructions = 2*64*768*256 / 4096); m16n8k8 for tf32 (2048), m16n8k32 for int8 (8192).
The precision is read from the kernel name (bf16, tf32, i8/imma; fp16 otherwise).

AMD (rocprof, gfx942; rocprofiler-compute analysis_configs/gfx942/0400_roofline.yaml):

    matrix FLOPs(p) = 512 * SQ_INSTS_VALU_MFMA_MOPS_<p>   (AMD docs, "MI300 and MI200 Series
        performance counters": "Number of <p> MFMA ops in the unit of 512")
    vector FLOPs(p) = 64 * (ADD_<p> + MUL_<p> + TRANS_<p> + 2 * FMA_<p>)  (SQ_INSTS_VALU_*: per
        wave instruction counts, 64 lanes a wave)

Bytes by level: NVIDIA dram__bytes.sum (DRAM), lts__t_bytes.sum (L2), l1tex__t_bytes.sum (L1);
AMD (gfx942, 128-byte lines; 64 on gfx90a):
    HBM = 128*TCC_BUBBLE + 64*(TCC_EA0_RDREQ - TCC_BUBBLE - TCC_EA0_RDREQ_32B) + 32*TCC_EA0_RDREQ_32B
          + 64*TCC_EA0_WRREQ_64B + 32*(TCC_EA0_WRREQ - TCC_EA0_WRREQ_64B)   (L2 to the fabric: the
          Infinity Cache may serve part of it)
    L2  = 128 * (TCP_TCC_READ_REQ + TCP_TCC_WRITE_REQ + TCP_TCC_ATOMIC_WITH_RET_REQ + ..._WITHOUT_RET_REQ)
    L1  = 128 * TCP_TOTAL_CACHE_ACCESSES          LDS = 4 * banks * (SQ_LDS_IDX_ACTIVE - SQ_LDS_BANK_CONFLICT)

Simulator (collectors/counters/simulator.py; the simulator's own counts, accelerator/sim/run.py):
    FLOPs(dtype) = flops, as matrix FLOPs when the kernel ran on the matrix unit (unit 'matrix'),
        else vector FLOPs; the kernel's dtype is the precision (a matrix kernel's fused vector
        epilogue, e.g. a GELU's one FLOP per element, counts with its matrix FLOPs)
    dram = hbm_read + hbm_written      l2 = shared_bytes (the chip's shared SRAM: the on-chip level
        between the cores and HBM, where a GPU has its L2)
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from analysis.columns import columns
from profiler.model.kernel_counters import KernelCounters

PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8")
LEVELS = ("dram", "l2", "l1", "lds")
_NV = "sm__sass_thread_inst_executed_op_"
_NV_VECTOR = {"fp64": "d", "fp32": "f", "fp16": "h"}
#: FLOPs of one warp-level MMA instruction on sm_80+, by precision (PTX ISA mma shapes).
MMA_FLOPS = {"fp16": 2 * 16 * 8 * 16, "bf16": 2 * 16 * 8 * 16, "tf32": 2 * 16 * 8 * 8, "int8": 2 * 16 * 8 * 32}
#: rocprof's MFMA MOPS counters count in units of 512 FLOPs (AMD docs, module docstring).
MOPS_UNIT = 512
_AMD_MOPS = {"fp64": "F64", "fp32": "F32", "fp16": "F16", "bf16": "BF16", "fp8": "F8", "int8": "I8"}
_AMD_VALU = {"fp64": "F64", "fp32": "F32", "fp16": "F16"}

MEASURED_COLUMNS = columns("kernel_counters")  # declared in analysis/columns.py


def _col(w: pd.DataFrame, name: str) -> pd.Series:
    """Counter `name` per launch; NaN where not recorded."""
    return w[name] if name in w else pd.Series(np.nan, index=w.index)


def _sum(w: pd.DataFrame, *terms: tuple[float, str]) -> pd.Series:
    """sum(k * counter); NaN only when none of the counters is recorded (missing ones count 0)."""
    present = [(k, n) for k, n in terms if n in w]
    if not present:
        return pd.Series(np.nan, index=w.index)
    return sum(k * w[n].fillna(0.0) for k, n in present)


def tensor_precision(kernel: str) -> str:
    """The MMA precision a kernel name says ('bf16', 'tf32', 'int8'; 'fp16' when it says none)."""
    k = kernel.lower()
    if re.search(r"bf16|bfloat16", k):
        return "bf16"
    if "tf32" in k:
        return "tf32"
    if re.search(r"imma|int8|_i8_|\bi8\b", k):
        return "int8"
    return "fp16"


def measured(kc: KernelCounters) -> pd.DataFrame:
    """One row per launch: MEASURED_COLUMNS. FLOPs (FLOP, int8 in OPs) by unit ('matrix' for tensor
    cores / MFMA, 'vector' for the SIMD lanes) and precision; bytes per level (byte); NaN where
    the file has not the counters. duration_from says where the time came from."""
    w = kc.wide().reindex(kc.launches["launch"].to_numpy())
    out = pd.DataFrame(index=w.index)
    lc = kc.launches.set_index("launch")
    for c in ("kernel", "occurrence", "device", "grid", "block"):
        out[c] = lc[c]
    dur = lc["duration_ns"].astype(float)
    frm = pd.Series(np.where(dur.notna(), "timestamps", ""), index=w.index, dtype=object)
    if "gpu__time_duration.sum" in w:
        frm[dur.notna()] = "gpu__time_duration.sum"
    cycles = _col(w, "sm__cycles_elapsed.avg") / _col(w, "sm__cycles_elapsed.avg.per_second") * 1e9
    use = dur.isna() & cycles.notna()
    dur[use], frm[use] = cycles[use], "sm__cycles_elapsed.avg / .per_second"
    out["duration_ns"], out["duration_from"] = dur, frm
    amd = any(c.startswith("SQ_") for c in w.columns)
    sim = kc.source == "simulator"
    for p in PRECISIONS:
        out[f"flops_matrix_{p}"] = np.nan
        out[f"flops_vector_{p}"] = np.nan
    if sim:
        _simulator_flops(kc, w, out)
    elif amd:
        for p, s in _AMD_MOPS.items():
            out[f"flops_matrix_{p}"] = MOPS_UNIT * _col(w, f"SQ_INSTS_VALU_MFMA_MOPS_{s}")
        for p, s in _AMD_VALU.items():
            v = "SQ_INSTS_VALU_"
            out[f"flops_vector_{p}"] = 64 * _sum(
                w, (1, f"{v}ADD_{s}"), (1, f"{v}MUL_{s}"), (1, f"{v}TRANS_{s}"), (2, f"{v}FMA_{s}")
            )
    else:
        for p, c in _NV_VECTOR.items():
            # CUPTI's range counters are per SM sub-partition ('smsp__'); ncu's per SM ('sm__'): same sum
            terms = [
                (k, f"{pre}{c}{op}_pred_on.sum")
                for pre in (_NV, "smsp" + _NV[2:])
                for k, op in ((1, "add"), (1, "mul"), (2, "fma"))
            ]
            out[f"flops_vector_{p}"] = _sum(w, *terms)
        hfma = _sum(w, (1, f"{_NV}hfma_pred_on.sum"), (1, f"smsp{_NV[2:]}hfma_pred_on.sum")).fillna(0.0)
        pipe = _col(w, "sm__inst_executed_pipe_tensor.sum")
        mma = (pipe - np.ceil(hfma / 32)).clip(lower=0)
        # what is left is MMA only when it is most of the pipe's work (an fp32 softmax leaves 60
        # of 160 unexplained: not MMA); else it stays in the raw counter, unattributed
        mma = mma.where((mma > pipe / 2) | mma.isna(), 0.0)  # NaN: no tensor-pipe counter recorded
        prec = out["kernel"].map(tensor_precision)
        for p, per in MMA_FLOPS.items():
            out[f"flops_matrix_{p}"] = np.where(prec == p, mma * per, np.where(mma.notna(), 0.0, np.nan))
    flop_cols = [c for c in out.columns if c.startswith("flops_")]
    out["flops"] = out[flop_cols].sum(axis=1, min_count=1)
    matrix = out[[c for c in flop_cols if c.startswith("flops_matrix_")]].sum(axis=1, min_count=1)
    if amd:
        fma = 64 * 2 * _sum(w, *((1, f"SQ_INSTS_VALU_FMA_{s}") for s in _AMD_VALU.values()))
    else:
        fma = 2 * _sum(w, *((1, f"{pre}{c}fma_pred_on.sum") for pre in (_NV, "smsp" + _NV[2:]) for c in "dfh"))
    out["flops_mac"] = matrix.fillna(0) + fma.fillna(0)
    out.loc[matrix.isna() & fma.isna(), "flops_mac"] = np.nan
    line = 64 if str(kc.info.get("gpu_arch", "")).startswith("gfx90") else 128
    banks = float(str(kc.info.get("lds_banks_per_cu") or 32))
    if amd:
        rd = _sum(w, (1, "TCC_EA0_RDREQ_sum"), (-1, "TCC_BUBBLE_sum"), (-1, "TCC_EA0_RDREQ_32B_sum"))
        hbm = _sum(w, (128, "TCC_BUBBLE_sum"), (32, "TCC_EA0_RDREQ_32B_sum"), (64, "TCC_EA0_WRREQ_64B_sum"))
        wr = _sum(w, (1, "TCC_EA0_WRREQ_sum"), (-1, "TCC_EA0_WRREQ_64B_sum"))
        out["bytes_dram"] = hbm + (line // 2) * rd.fillna(0) + 32 * wr.fillna(0) if "TCC_EA0_RDREQ_sum" in w else np.nan
        out["bytes_l2"] = line * _sum(
            w,
            (1, "TCP_TCC_READ_REQ_sum"),
            (1, "TCP_TCC_WRITE_REQ_sum"),
            (1, "TCP_TCC_ATOMIC_WITH_RET_REQ_sum"),
            (1, "TCP_TCC_ATOMIC_WITHOUT_RET_REQ_sum"),
        )
        out["bytes_l1"] = line * _col(w, "TCP_TOTAL_CACHE_ACCESSES_sum")
        out["bytes_lds"] = 4 * banks * (_col(w, "SQ_LDS_IDX_ACTIVE") - _col(w, "SQ_LDS_BANK_CONFLICT").fillna(0))
    elif sim:
        out["bytes_dram"] = _sum(w, (1, "hbm_read"), (1, "hbm_written"))
        out["bytes_l2"] = _col(w, "shared_bytes")
        out["bytes_l1"] = out["bytes_lds"] = np.nan
    else:
        out["bytes_dram"] = _col(w, "dram__bytes.sum")
        out["bytes_l2"] = _col(w, "lts__t_bytes.sum")
        out["bytes_l1"] = _col(w, "l1tex__t_bytes.sum")
        out["bytes_lds"] = np.nan
    out["occupancy_pct"] = _col(w, "Achieved Occupancy")
    out = out.reset_index(names="launch")
    return out[MEASURED_COLUMNS]


def _simulator_flops(kc: KernelCounters, w: pd.DataFrame, out: pd.DataFrame) -> None:
    """flops_<unit>_<dtype> of a simulated trace's launches (module docstring): each kernel's
    `flops` under its unit (matrix or vector) and dtype, 0 under the others."""
    text = kc.rows[kc.rows["counter"].isin(("unit", "dtype"))].pivot_table(
        index="launch", columns="counter", values="text", aggfunc="first"
    )
    unit = text["unit"].reindex(w.index) if "unit" in text else pd.Series("", index=w.index)
    dtype = text["dtype"].reindex(w.index) if "dtype" in text else pd.Series("", index=w.index)
    flops = _col(w, "flops")
    for p in PRECISIONS:
        for u in ("matrix", "vector"):
            mine = (dtype == p) & ((unit == "matrix") == (u == "matrix"))
            out[f"flops_{u}_{p}"] = np.where(mine, flops, np.where(flops.notna(), 0.0, np.nan))


#: Recorded utilisation counters, % of peak: Nsight Compute's throughput metrics by unit.
RECORDED_PCT = {
    "sm": "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "l2": "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1": "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
    "memory": "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
}


def recorded_utilisation(kc: KernelCounters) -> pd.DataFrame:
    """Per launch, the utilisation the profiler itself recorded (% of peak), by unit: columns
    launch and `<unit>_pct` for RECORDED_PCT's units (NaN where not recorded)."""
    w = kc.wide().reindex(kc.launches["launch"].to_numpy())
    out = pd.DataFrame({f"{u}_pct": _col(w, c).to_numpy() for u, c in RECORDED_PCT.items()})
    out.insert(0, "launch", kc.launches["launch"].to_numpy())
    return out
