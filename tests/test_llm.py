"""LLM serving phases (analysis.llm): the real SGLang and vLLM traces (expected counts parsed
here from the files with plain json), a hand-built trace whose figures are worked out below,
attention shapes recorded here with torch.profiler, and traces that are not LLM serving."""

from __future__ import annotations

import gzip
import json
import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile, schedule

from analysis.llm import kv_cache_footprint, llm_phases, llm_summary
from profiler import load_trace
from profiler.model.hardware import from_dict, load_spec
from tests.conftest import real_trace, write_trace, x

EXAMPLE_MLP = Path(__file__).resolve().parents[1] / "examples" / "traces" / "mlp_cpu.json.gz"
EXECUTE = re.compile(r"^execute_(\d+)_context_(\d+)\(sq(\d+)sk(\d+)sqsq\d+sqsk\d+\)_generation_(\d+)\(sq(\d+)sk(\d+)")


def _annotations(folder: str) -> list[str]:
    doc = json.loads(gzip.decompress(real_trace(folder).read_bytes()))
    return [e["name"] for e in doc["traceEvents"] if e.get("cat") == "user_annotation"]


# ---------------------------------------------------------------------------- real traces


def test_sglang_decode_trace_is_one_decode_step():
    names = _annotations("sglang_qwen3_decode_mi300x")
    decode = [n for n in names if n.startswith("step[DECODE")]
    bs = int(re.search(r"bs=(\d+)", decode[0])[1])
    n, _, _, _, gen, gen_sq, gen_sk = map(int, next(EXECUTE.match(s) for s in names if EXECUTE.match(s)).groups())
    ph = llm_phases(load_trace(real_trace("sglang_qwen3_decode_mi300x")))
    assert len(ph) == len(decode) == 1  # the execute_ annotation around it is the same step
    row = ph.iloc[0]
    assert (row["phase"], row["batch_size"], row["tokens"], row["decode_tokens"]) == ("decode", bs, bs, gen_sq)
    assert (gen, n) == (bs, bs)  # 32 requests, one query token each
    assert row["kv_tokens"] == gen_sk  # 32785 key tokens attended
    assert row["device"] == "gpu9" and 0 < row["device_busy_ns"] <= row["duration_ns"]
    # the model runs inside a HIP graph: no cache-write op is recorded, so no KV bytes
    assert math.isnan(row["kv_read_bytes"]) and "no KV-cache write op" in row["note"]
    s = llm_summary(ph).iloc[0]
    assert s["phase"] == "decode" and s["tpot_ns"] == row["duration_ns"]
    assert s["tokens_per_s"] == pytest.approx(bs / row["duration_ns"] * 1e9)


def test_sglang_decode_kv_bytes_from_the_prefill_trace_of_the_same_server():
    """The decode trace's model runs in a HIP graph; the prefill trace of the same server records
    the cache writes: 36 layers x (8 heads x 128 dims x 2 B) x (K and V) = 147,456 B a token."""
    kv = kv_cache_footprint(load_trace(real_trace("sglang_qwen3_prefill_mi300x")))
    assert kv.iloc[0]["bytes_per_token"] == 36 * 8 * 128 * 2 * 2
    trace = load_trace(real_trace("sglang_qwen3_decode_mi300x"))
    mi300x = load_spec("mi300x")
    row = llm_phases(trace, lambda rank, device: mi300x, kv=kv).iloc[0]
    assert row["kv_read_bytes"] == 32785 * 147_456  # key tokens attended x bytes a token = 4.83 GB
    assert row["kv_floor_ns"] == pytest.approx(32785 * 147_456 / mi300x.bandwidth() * 1e9)  # ~0.91 ms at 5.3 TB/s
    assert row["kv_floor_efficiency"] == pytest.approx(row["kv_floor_ns"] / row["device_busy_ns"])
    assert 0 < row["kv_floor_efficiency"] < 1


def test_sglang_prefill_trace_is_one_prefill_step():
    names = _annotations("sglang_qwen3_prefill_mi300x")
    extend = [n for n in names if n.startswith("step[EXTEND")]
    bs, toks = (int(v) for v in re.search(r"bs=(\d+) toks=(\d+)", extend[0]).groups())
    trace = load_trace(real_trace("sglang_qwen3_prefill_mi300x"))
    ph = llm_phases(trace)
    assert len(ph) == len(extend) == 1
    row = ph.iloc[0]
    assert (row["phase"], row["batch_size"], row["tokens"], row["prefill_tokens"]) == ("prefill", bs, toks, toks)
    assert math.isnan(row["kv_floor_ns"])  # floors are for decode steps
    s = llm_summary(ph).iloc[0]
    assert s["ttft_ns"] == row["duration_ns"] and "lower bound" in s["note"]
    assert math.isnan(s["tpot_ns"])


def test_decode_tpot_beside_device_and_host_time():
    """The SGLang decode step lasts 474 ms while the GPU is busy 9.8 ms: the host spends 463 ms
    in one hipMemcpyWithStream (a synchronous copy, parsed here from the file), so the TPOT is
    serving overhead, and the summary says so beside the number."""
    doc = json.loads(gzip.decompress(real_trace("sglang_qwen3_decode_mi300x").read_bytes()))
    copies = [e["dur"] for e in doc["traceEvents"] if e.get("name") == "hipMemcpyWithStream"]
    ph = llm_phases(load_trace(real_trace("sglang_qwen3_decode_mi300x")))
    row = ph.iloc[0]
    assert row["host_wait_ns"] == pytest.approx(sum(copies) * 1e3, abs=1e3)  # us -> ns, 463 ms
    assert row["host_wait_ns"] <= row["host_busy_ns"] <= row["duration_ns"]
    s = llm_summary(ph).iloc[0]
    assert (s["tpot_ns"], s["tpot_device_ns"], s["tpot_host_ns"], s["tpot_wait_ns"]) == (
        row["duration_ns"],
        row["device_busy_ns"],
        row["host_busy_ns"],
        row["host_wait_ns"],
    )
    assert s["tpot_device_ns"] < 0.05 * s["tpot_ns"]  # 9.8 of 474 ms
    assert "device is busy 2% of TPOT" in s["note"] and "serving overhead" in s["note"]


def test_vllm_step_is_mixed():
    names = _annotations("vllm_graphs_mi300x")
    n, ctx, ctx_sq, ctx_sk, gen, gen_sq, gen_sk = map(int, EXECUTE.match(names[0]).groups())
    assert ctx > 0 and gen > 0  # 9 prefill chunks and 37 decodes in one step
    ph = llm_phases(load_trace(real_trace("vllm_graphs_mi300x")))
    row = ph.iloc[0]
    assert len(ph) == 1 and row["phase"] == "mixed"
    assert (row["batch_size"], row["tokens"], row["prefill_tokens"], row["decode_tokens"]) == (
        ctx + gen,
        n,
        ctx_sq,
        gen_sq,
    )
    assert row["kv_tokens"] == ctx_sk + gen_sk
    assert "ttft not derivable" in llm_summary(ph).iloc[0]["note"]


def test_b200_vllm_prefill_in_the_older_annotation_form():
    names = _annotations("b200_eager")
    m = next(
        re.match(r"^execute_context_(\d+)\((\d+)_\d+\)_generation_(\d+)", s) for s in names if s.startswith("execute_")
    )
    ctx, tokens, gen = map(int, m.groups())
    ph = llm_phases(load_trace(real_trace("b200_eager")))
    assert len(ph) == 1
    assert (ph.iloc[0]["phase"], ph.iloc[0]["tokens"], ph.iloc[0]["batch_size"]) == ("prefill", tokens, ctx + gen)


@pytest.mark.parametrize(
    "path",
    [EXAMPLE_MLP, real_trace("ddp_allreduce_v100"), real_trace("resnet50_legacy_v100")],
    ids=["mlp_cpu", "ddp_allreduce_v100", "resnet50_legacy_v100"],
)
def test_not_llm_serving_yields_empty_frames(path):
    trace = load_trace(path)
    ph = llm_phases(trace)
    assert ph.empty and "phase" in ph.columns
    assert llm_summary(ph).empty and kv_cache_footprint(trace).empty


# ---------------------------------------------------------------------------- hand-built

# Two layers; each writes its KV cache once per step through sglang::store_cache:
# key/value [T, 64] bf16 into caches [1000, 64] bf16.
#   per token per layer: 64*2 + 64*2 = 256 B; 2 layers: 512 B a token
#   per layer cache: 2 * 1000*64*2 = 256,000 B; 2 layers: 512,000 B of a 1 GiB device
PROPS = [{"id": 0, "name": "Test GPU", "totalGlobalMem": 2**30, "numSms": 10, "computeMajor": 9, "computeMinor": 0}]
SPEC = from_dict(
    {
        "name": "test",
        "kind": "gpu",
        "vendor": "t",
        "peak_flops": {"vector": {"fp32": 1e12}},
        "memory": [{"name": "hbm", "capacity_bytes": 2**30, "bandwidth": 1e9}],
        "min_op_time": 0,
    }
)  # 1 GB/s


def _store(ts: float, t: int) -> dict:
    return x(
        "sglang::store_cache",
        "cpu_op",
        ts,
        2,
        **{
            "Input Dims": [[t, 64], [t, 64], [1000, 64], [1000, 64], [t]],
            "Input type": ["c10::BFloat16"] * 4 + ["long int"],
            "Concrete Inputs": [""] * 5,
        },
    )


def _launch(ts: float, corr: int, k_ts: float, k_dur: float) -> list[dict]:
    return [
        x("cudaLaunchKernel", "cuda_runtime", ts, 2, correlation=corr),
        x(f"kernel{corr}", "kernel", k_ts, k_dur, pid=0, tid=7, device=0, stream=7, correlation=corr),
    ]


HAND = [  # times in us
    # prefill: 2 sequences, 16 tokens; its kernel ends (80) before the annotation does (100)
    x("step[PREFILL bs=2 toks=16]", "user_annotation", 0, 100),
    _store(10, 16),
    _store(40, 16),
    *_launch(20, 1, 30, 50),
    # decode, 4 sequences attending 40 key tokens in all; the kernel ends at 280, after the
    # annotations (250): duration 280 - 200 = 80 us, device busy 60 us
    x("execute_4_context_0(sq0sk0sqsq0sqsk0)_generation_4(sq4sk40sqsq4sqsk40)", "user_annotation", 200, 50),
    x("step[DECODE bs=4]", "user_annotation", 205, 40),
    _store(207, 4),
    _store(230, 4),
    *_launch(210, 2, 220, 60),
    # decode without the execute_ annotation (KV lengths unknown): 300..340, busy 20 us
    x("step[DECODE bs=4]", "user_annotation", 300, 40),
    *_launch(310, 3, 315, 20),
]


@pytest.fixture
def hand(tmp_path):
    return load_trace(write_trace(tmp_path / "llm.json", HAND, deviceProperties=PROPS))


def test_hand_built_steps(hand):
    ph = llm_phases(hand, lambda rank, device: SPEC if device == "gpu0" else None)
    assert ph["phase"].tolist() == ["prefill", "decode", "decode"]
    assert ph["tokens"].tolist() == [16, 4, 4]
    assert ph["duration_ns"].tolist() == [100_000, 80_000, 40_000]
    assert ph["device_busy_ns"].tolist() == [50_000, 60_000, 20_000]
    d = ph.iloc[1]
    assert d["kv_tokens"] == 40
    assert d["kv_read_bytes"] == 40 * 512  # 40 key tokens x 512 B (2 layers x 256 B) = 20,480 B
    assert d["kv_floor_ns"] == pytest.approx(20_480)  # 20,480 B / 1e9 B/s = 20.48 us
    assert d["kv_floor_efficiency"] == pytest.approx(20_480 / 60_000)  # floor / device busy = 0.341
    assert math.isnan(ph.iloc[2]["kv_read_bytes"]) and "not recorded" in ph.iloc[2]["note"]


def test_hand_built_summary(hand):
    s = llm_summary(llm_phases(hand, lambda rank, device: SPEC)).set_index("phase")
    # prefill: 16 tokens in 100 us = 160,000 tokens/s; its duration bounds TTFT from below
    assert s.loc["prefill", "tokens_per_s"] == pytest.approx(16 / 100e-6)
    assert s.loc["prefill", "ttft_ns"] == 100_000
    # decode: 4 + 4 tokens in 80 + 40 us = 66,667 tokens/s; TPOT = mean step = (80 + 40) / 2 = 60 us
    assert s.loc["decode", "tokens_per_s"] == pytest.approx(8 / 120e-6)
    assert s.loc["decode", "tpot_ns"] == 60_000
    assert s.loc["decode", "tpot_device_ns"] == 40_000  # (60 + 20) / 2 us busy
    assert s.loc["decode", "kv_floor_efficiency"] == pytest.approx(20_480 / 60_000)  # only step 1 has bytes
    assert s.loc["decode", "steps"] == 2


def test_hand_built_kv_footprint(hand):
    kv = kv_cache_footprint(hand).iloc[0]
    assert (kv["per_token_layer_bytes"], kv["layers"], kv["bytes_per_token"]) == (256, 2, 512)
    assert (kv["per_layer_bytes"], kv["slots"], kv["kv_cache_bytes"]) == (256_000, 1000, 512_000)
    assert kv["share"] == pytest.approx(512_000 / 2**30)


def test_steps_disagreeing_on_layers_give_no_footprint(tmp_path):
    events = [e for e in HAND if not (e["name"] == "sglang::store_cache" and e["ts"] == 230)]  # decode writes once
    kv = kv_cache_footprint(load_trace(write_trace(tmp_path / "l.json", events, deviceProperties=PROPS))).iloc[0]
    assert math.isnan(kv["layers"]) and "different numbers" in kv["note"]


# ---------------------------------------------------------------------------- shapes, recorded here


@pytest.fixture(scope="module")
def sdpa_trace(tmp_path_factory):
    """ProfilerSteps of a 2-layer attention: a prefill of 8 tokens, then decodes at 9 and 10 keys."""
    path = tmp_path_factory.mktemp("sdpa") / "sdpa.json"
    b, h, d = 2, 4, 16

    def step(lq: int, lk: int) -> None:
        q, k, v = torch.randn(b, h, lq, d), torch.randn(b, h, lk, d), torch.randn(b, h, lk, d)
        for _ in range(2):  # two layers
            F.scaled_dot_product_attention(q, k, v)

    sched = schedule(wait=0, warmup=1, active=3)
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        schedule=sched,
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        prof.step()  # the warm-up step, not recorded
        for lq, lk in ((8, 8), (1, 9), (1, 10)):
            step(lq, lk)
            prof.step()
    return load_trace(path)


def test_attention_shapes_classify_steps(sdpa_trace):
    cpu = load_spec("generic-x86-cpu")
    ph = llm_phases(sdpa_trace, lambda rank, device: cpu)
    assert ph["source"].unique().tolist() == ["shapes"]
    assert ph["phase"].tolist() == ["prefill", "decode", "decode"]
    assert ph["batch_size"].tolist() == [2, 2, 2]
    assert ph["tokens"].tolist() == [16, 2, 2]  # prefill: B * Lq = 2 * 8; decode: one per sequence
    # decode at 9 keys: 2 layers x (K + V) x 2*4*9*16 fp32 elements x 4 B = 18,432 B
    assert ph["kv_read_bytes"].iloc[1] == 2 * 2 * (2 * 4 * 9 * 16) * 4
    assert ph["kv_floor_ns"].iloc[1] == pytest.approx(18_432 / 20e9 * 1e9)  # nominal 20 GB/s DRAM
    assert (ph["device"] == "cpu").all() and (ph["device_busy_ns"] > 0).all()


# ---------------------------------------------------------------------------- not generation


def _profiled(path, body, steps: int = 3):
    sched = schedule(wait=0, warmup=1, active=steps)
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        schedule=sched,
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for _ in range(steps + 1):
            body()
            prof.step()
    return load_trace(path)


def test_a_denoising_loop_is_not_prefill(tmp_path):
    """Same attention shapes every step (a diffusion model's denoising loop: Lq = Lk = 64, no
    KV cache, no one-token query): no prefill, no decode, no TTFT."""
    torch.manual_seed(0)
    latents = torch.randn(2, 4, 64, 16)

    def denoise():
        nonlocal latents
        latents = latents - 0.1 * F.scaled_dot_product_attention(latents, latents, latents)

    trace = _profiled(tmp_path / "denoise.json", denoise)
    assert llm_phases(trace).empty and llm_summary(llm_phases(trace)).empty
    assert kv_cache_footprint(trace).empty


def test_a_training_step_is_not_prefill(tmp_path):
    """A training step of an attention layer (forward, backward, SGD): no LLM phases."""
    torch.manual_seed(0)
    w = torch.randn(16, 16, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    x_in = torch.randn(2, 4, 32, 16)

    def train():
        opt.zero_grad()
        q = x_in @ w
        F.scaled_dot_product_attention(q, q, q).sum().backward()
        opt.step()

    trace = _profiled(tmp_path / "train.json", train)
    assert llm_phases(trace).empty
