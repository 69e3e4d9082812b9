"""Measured FLOPs and bytes from counters, against the cost model: the rocprof GEMM run's MFMA
counts in their documented units, tile padding as the reason, the attention runs' FLOPs and DRAM
bytes beside the model's, and the measured roofline."""

from __future__ import annotations

import csv
import math

import pytest

from analysis.counters import measured
from analysis.measured_roofline import measured_roofline
from collectors.counters import read_counters
from profiler.api import analyze, load_trace
from profiler.model.hardware import load_spec
from tests.conftest import COUNTERS, write_trace, x

GEMM = COUNTERS / "rocprof_mi325x_gemm"
HIPBLASLT = (
    "Cijk_Ailk_Bljk_BBS_BH_UserArgs_MT256x224x64_MI16x16x1_SN_LDSB1_AFC0_AFEM8_AFEM8_ASEM32_CLR1_CADS0_DTVA0_DTVB0_EPS0_"
    "FDSI0_GRPM1_GRVWA8_GRVWB4_GSUAMB_GLS0_ISA942_IU1_K1_LBSPPA2048_LBSPPB128_LBSPPM0_LPA16_LPB4_LPM0_LRVW4_LWPMn1_MIAV0_"
    "MIWT4_14_MO40_NTn1_NTA0_NTB0_NTC0_NTD0_NTM0_NEPBS0_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO0_SRVW0_SSO0_SVW4_SK0_"
    "SKXCCM0_TLDS1_ULSGRO0_USL1_UIOFGRO0_USFGROn1_VSn1_VWA4_VWB1_WSGRA1_WSGRB2_WS64_WG64_4_1"
)
MICRO_TK = "micro_tk(micro_globals)"
MI325X = {
    "deviceProperties": [
        {
            "id": 0,
            "name": "AMD Instinct MI325X",
            "totalGlobalMem": 274877906944,
            "computeMajor": 9,
            "computeMinor": 4,
            "numSms": 304,
        }
    ]
}


@pytest.fixture(scope="module")
def gemm_counters():
    return read_counters(GEMM)


def test_mfma_counters_give_bf16_flops_in_units_of_512(gemm_counters):
    m = measured(gemm_counters)
    hip = m[m["kernel"].str.startswith("Cijk_")]
    tk = m[m["kernel"].str.startswith("micro_tk")]
    assert len(hip) == len(tk) == 60
    # AMD, "MI300 and MI200 Series performance counters": SQ_INSTS_VALU_MFMA_MOPS_BF16 is
    # "Number of BF16 floating MFMA ops in the unit of 512". HipKittens' kernel runs exactly the
    # 4096^3 GEMM: 268,435,456 MOPS * 512 = 2 * 4096^3.
    assert (tk["flops_matrix_bf16"] == 2 * 4096**3).all()
    # hipBLASLt's MT256x224 tile covers N = 4096 with ceil(4096/224) = 19 tiles = 4256 columns
    assert (hip["flops_matrix_bf16"] == 2 * 4096 * 4256 * 4096).all()
    assert hip["flops_matrix_bf16"].iloc[0] / (2 * 4096**3) == 4256 / 4096 == 1.0390625


def test_launch_tiles_from_the_name_and_the_grid(gemm_counters):
    from profiler.api import counters_report

    report = counters_report(gemm_counters, hardware="mi325x")
    # Grid_Size 77,824 work-items / 256 per workgroup = 304 = 16 x 19 tiles of 256x224;
    # K = 2*4096*4256*4096 / (2 * 304 * 256 * 224) = 4096
    assert report.tiles[6] == "304 workgroups x 256x224 tiles, K = FLOPs / (2 * tiles * tile area) = 4096"


def _gemm_trace(tmp_path, extra_kernel: bool = False):
    """Two aten::mm 4096^3 bf16 ops per library, each launching the library's kernel (Kineto
    spelling: no ' [clone .kd]'), optionally one kernel the counter run never profiled."""
    mm = {"Input Dims": [[4096, 4096], [4096, 4096]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}
    events, t = [], 0
    names = [HIPBLASLT] * 2 + [MICRO_TK] * 2 + (["never_profiled_kernel"] if extra_kernel else [])
    for c, kernel in enumerate(names, 1):
        events += [
            x("aten::mm", "cpu_op", t, 20, **mm),
            x("hipLaunchKernel", "cuda_runtime", t + 1, 5, correlation=c, **{"External id": c}),
            x(kernel, "kernel", t + 10, 190, pid=0, tid=1, device=0, stream=0, correlation=c),
        ]
        t += 300
    return load_trace(write_trace(tmp_path / "gemm.json", events, **MI325X))


def test_gemm_measured_vs_modelled_shows_ratio_and_padding(tmp_path, gemm_counters):
    a = analyze(_gemm_trace(tmp_path, extra_kernel=True), counters=gemm_counters)
    from analysis.columns import columns

    for table in ("kernel_counters", "measured_roofline", "counters_vs_model"):  # as declared
        assert list(getattr(a, table).columns) == columns(table), table
    c = a.counters_vs_model
    hip = c[c["kernel"].str.startswith("Cijk_")]
    tk = c[c["kernel"].str.startswith("micro_tk")]
    assert len(hip) == len(tk) == 2
    assert (hip["flops_model"] == 2 * 4096**3).all() and (tk["flops_model"] == 2 * 4096**3).all()
    # measured = the MFMA bf16 FLOPs plus the few fp32 VALU FLOPs of the epilogue
    assert hip["flops_ratio"].iloc[0] == pytest.approx(1.0390625, rel=1e-4)
    assert tk["flops_ratio"].iloc[0] == pytest.approx(1.0, rel=1e-4)
    reason = hip["reason"].iloc[0]
    assert "304 tiles of 256x224 = 4096x4256" in reason and "1.0390625x" in reason
    assert (tk["reason"] == "").all()
    kinds = {(f.kind, f.message[:40]) for f in a.counters.findings}
    assert any(k == "tile padding" for k, _ in kinds)
    # every launch is accounted for: 4 joined; 266 counter launches and 1 trace kernel left over
    j = a.counters.join
    assert (j["matched"], j["counters_unmatched"], j["trace_unmatched"]) == (4, 266, 1)


def test_correlation_ids_join_before_names(tmp_path):
    from analysis.counters_join import join

    v3 = tmp_path / "x_counter_collection.csv"
    v3.write_text(
        "Correlation_Id,Dispatch_Id,Agent_Id,Kernel_Name,Counter_Name,Counter_Value,Start_Timestamp,End_Timestamp\n"
        "2,1,1,renamed_by_the_profiler,SQ_WAVES,4,0,10\n"
    )
    trace = _gemm_trace(tmp_path)
    joined, summary = join(trace, read_counters(v3))
    kernel = trace.events[(trace.events["kind"] == "kernel") & (trace.events["correlation"] == 2)]
    assert summary["by"] == {"correlation": 1}
    assert joined.loc[0, "event_id"] == kernel["id"].iloc[0]


def _ncu_names(path):
    with open(path, newline="") as f:
        return {int(r["ID"]): r["Kernel Name"] for r in csv.DictReader(f)}


def _kineto_spelling(name: str) -> str:
    """How Kineto (cxxabi) writes what Nsight Compute wrote: no '(int)' casts, 'true' for
    '(bool)1', '(anonymous namespace)' for '<unnamed>'."""
    n = name.replace("(bool)1", "true").replace("(bool)0", "false").replace("<unnamed>", "(anonymous namespace)")
    for cast in ("(int)", "(unsigned int)", "(unsigned long)", "(long)", "(char)"):
        n = n.replace(cast, "")
    return n


def _attention_trace(tmp_path, csv_path, ops):
    """An A100 trace of `ops` [(name, Input Dims, Input type, [ncu launch ids of its kernels])],
    kernels named as Kineto names them. Shapes: the run's script (leleucas/Actual-Parameter-
    Collection..., attention/actual_parameter_analysis/multihead_atten.py): BERT, embed_dim 256,
    8 heads, batch 2, sequence 20."""
    names = _ncu_names(csv_path)
    events, t, c = [], 0, 1
    for op, dims, types, launches in ops:
        events.append(x(op, "cpu_op", t, 50, **{"Input Dims": dims, "Input type": types}))
        for launch in launches:
            events.append(x("cudaLaunchKernel", "cuda_runtime", t + 1, 2, correlation=c, **{"External id": c}))
            events.append(
                x(_kineto_spelling(names[launch]), "kernel", t + 10, 8, pid=0, tid=7, device=0, stream=7, correlation=c)
            )
            c += 1
            t += 20
        t += 100
    props = {
        "deviceProperties": [
            {
                "id": 0,
                "name": "NVIDIA A100-SXM4-40GB",
                "totalGlobalMem": 42505273344,
                "computeMajor": 8,
                "computeMinor": 0,
                "numSms": 108,
            }
        ]
    }
    return load_trace(write_trace(tmp_path / "attn.json", events, **props))


def test_eager_attention_counters_beside_the_model(tmp_path):
    path = COUNTERS / "ncu_a100_attention" / "bert_torch_nsight.csv"
    f32 = ["float", "float", "float"]
    lin = [[2, 20, 256], [256, 256], [256]]
    ops = [
        ("aten::linear", lin, f32, [6, 7]),  # q projection: sgemm + split-K reduce
        ("aten::linear", lin, f32, [10, 11]),  # k
        ("aten::linear", lin, f32, [14, 15]),  # v
        ("aten::bmm", [[16, 20, 32], [16, 32, 20]], f32[:2], [18]),  # q k^T per head
        ("aten::_softmax", [[16, 20, 20], [], []], ["float", "Scalar", "Scalar"], [19]),
        ("aten::bmm", [[16, 20, 20], [16, 20, 32]], f32[:2], [20]),  # attention @ v
    ]
    a = analyze(_attention_trace(tmp_path, path, ops), counters=read_counters(path))
    c = a.counters_vs_model.set_index("unit_id")
    assert len(c) == 6
    j = a.counters.join
    assert (j["matched"], j["counters_unmatched"], j["trace_unmatched"]) == (9, 26 - 9, 0)
    q = c[c["name"] == "aten::linear"].iloc[0]
    # model: 2 * 40 * 256 * 256 = 5,242,880; the sgemm_32x32 ran 4,194,304 FFMAs = 2*64*256*256:
    # its 40 rows padded to two 32-row tiles
    assert q["flops_model"] == 2 * 40 * 256 * 256
    assert "40x256 output computed as 16 tiles of 32x32 = 64x256" in q["reason"]
    # DRAM: model (inputs 40*256 + 256*256 + 256, output 40*256) * 4 bytes = 345,088; measured
    # dram__bytes.sum of launches 6 and 7 in the file: 303,360 + 163,968
    assert q["bytes_dram_model"] == (40 * 256 + 256 * 256 + 256 + 40 * 256) * 4
    assert q["bytes_dram_measured"] == 303_360 + 163_968
    assert q["bytes_ratio"] == pytest.approx((303_360 + 163_968) / 345_088)
    bmm = c[c["name"] == "aten::bmm"]
    # q k^T: 2*16*20*20*32 = 409,600 modelled; sgemm_128x128 computes 128x128 tiles: 2*16*128*128*32
    assert bmm["flops_model"].iloc[0] == 2 * 16 * 20 * 20 * 32
    assert "128x128 = 128x128 (K=32)" in bmm["reason"].iloc[0]
    # attention @ v: K = 20 keys, padded to 24 by the kernel's 8-deep loop: 6,291,456 FFMAs = 2*16*128*128*24 / 2
    assert "K=20 padded to 24" in bmm["reason"].iloc[1]
    assert (c["matrix_share"].fillna(0) == 0).all()  # fp32 eager: sgemm on the FMA pipe, no tensor cores
    # findings: the GEMMs' padding; the softmax's instruction-level FLOPs (exp as several
    # instructions) exceed the model's one-per-element count but are no finding
    found = {(f.kind, f.name) for f in a.counters.findings}
    assert found == {("tile padding", "aten::linear"), ("tile padding", "aten::bmm")}
    linear = next(f for f in a.counters.findings if f.name == "aten::linear")
    assert linear.message.endswith("(3 ops alike)")


def test_flash_attention_qkv_gemm_runs_on_tensor_cores(tmp_path):
    path = COUNTERS / "ncu_a100_attention" / "bert_flashattn_nsight.csv"
    ops = [("aten::linear", [[2, 20, 256], [768, 256], [768]], ["c10::Half"] * 3, [5])]  # Wqkv
    a = analyze(_attention_trace(tmp_path, path, ops), counters=read_counters(path))
    r = a.counters_vs_model.iloc[0]
    # 6,144 tensor-pipe instructions x 4096 FLOPs (mma.m16n8k16) = 2*64*768*256: rows 40 -> 64
    assert a.kernel_counters.set_index("launch").loc[5, "flops_matrix_fp16"] == 6144 * 4096 == 2 * 64 * 768 * 256
    assert r["flops_model"] == 2 * 40 * 768 * 256
    assert r["matrix_share"] > 0.99
    assert "64x768" in r["reason"]
    assert r["bytes_dram_measured"] == 415_488


def test_measured_roofline_against_the_preset(gemm_counters):
    m = measured(gemm_counters)
    roof = measured_roofline(m, load_spec("mi325x")).set_index("launch")
    r = roof.loc[6]
    flops = m.set_index("launch").loc[6, "flops"]
    # achieved = FLOPs / 158,834 ns; peak bf16 matrix 1307.4e12 (AMD MI325X data sheet)
    assert r["achieved_flops_per_s"] == pytest.approx(flops / 158_834e-9)
    assert r["compute_pct"] == pytest.approx(100 * flops / 158_834e-9 / 1307.4e12)
    assert (r["precision"], r["unit"], r["bound"]) == ("bf16", "matrix", "compute")
    drop = read_counters(COUNTERS / "ncu_a100_dropout" / "nsight162.csv")
    d = measured_roofline(measured(drop), load_spec("a100-sxm-40gb")).iloc[0]
    # 4,194,688 DRAM bytes in 11,744 ns against 1,555 GB/s: 22.97% of the HBM's peak
    assert d["dram_pct"] == pytest.approx(100 * 4_194_688 / 11_744e-9 / 1555e9)
    assert math.isnan(d["lds_pct"])


def test_a_16_bit_gemm_on_the_vector_pipe_is_a_finding(tmp_path):
    # a bf16 64^3 GEMM whose kernel ran no MFMA: 4,096 wave FMAs x 64 lanes x 2 = 2 * 64^3 FLOPs, all VALU
    mm = {"Input Dims": [[64, 64], [64, 64]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}
    events = [
        x("aten::mm", "cpu_op", 0, 20, **mm),
        x("hipLaunchKernel", "cuda_runtime", 1, 5, correlation=7, **{"External id": 7}),
        x("naive_gemm", "kernel", 10, 50, pid=0, tid=1, device=0, stream=0, correlation=7),
    ]
    trace = load_trace(write_trace(tmp_path / "t.json", events, **MI325X))
    v3 = tmp_path / "naive_counter_collection.csv"
    v3.write_text(
        "Correlation_Id,Dispatch_Id,Agent_Id,Kernel_Name,Counter_Name,Counter_Value,Start_Timestamp,End_Timestamp\n"
        "7,1,1,naive_gemm,SQ_INSTS_VALU_FMA_F32,4096,0,50000\n"
        "7,1,1,naive_gemm,SQ_INSTS_VALU_MFMA_MOPS_BF16,0,0,50000\n"
    )
    a = analyze(trace, counters=read_counters(v3))
    r = a.counters_vs_model.iloc[0]
    assert r["flops_measured"] == r["flops_model"] == 2 * 64**3 and r["matrix_share"] == 0
    assert [f.kind for f in a.counters.findings] == ["no tensor cores"]
    assert "ran 0% of its FLOPs on tensor/matrix cores" in a.counters.findings[0].message
