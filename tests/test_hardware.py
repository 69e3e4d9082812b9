"""HardwareSpec presets: they load, they are sane, they carry the datasheet numbers, and real
traces' deviceProperties match the right one."""

from __future__ import annotations

import gzip
import json
import pickle
from pathlib import Path

import pytest
import yaml

from profiler.model.errors import InputError
from profiler.model.hardware import (
    DTYPES,
    PRESETS_DIR,
    HardwareSpec,
    from_dict,
    load_spec,
    presets,
    save_spec,
)
from profiler.model.hardware_describe import describe
from profiler.model.hardware_match import match_device, match_properties
from tests.conftest import TRACES

T = 1e12
G = 1e9

EXPECTED_PRESETS = {
    "v100-sxm2-16gb",
    "v100-sxm2-32gb",
    "a100-sxm-40gb",
    "a100-sxm-80gb",
    "h100-sxm",
    "h100-pcie",
    "h200",
    "b200",
    "mi250x",
    "mi300x",
    "generic-x86-cpu",
}


def test_presets_listed():
    assert EXPECTED_PRESETS <= set(presets())


@pytest.mark.parametrize("name", sorted(EXPECTED_PRESETS))
def test_preset_loads_and_is_sane(name):
    s = load_spec(name)
    assert isinstance(s, HardwareSpec) and s.name == name
    assert s.kind in ("gpu", "cpu", "npu")
    for unit, table in s.peak_flops.items():
        assert unit in ("matrix", "vector")
        for dt, v in table.items():
            assert dt in DTYPES and v > 0
    # the matrix unit is never slower than the vector unit at the same or wider precision
    assert s.peak("fp16", "matrix") >= s.peak("fp32", "vector")
    assert s.peak("bf16", "matrix") >= s.peak("fp32", "vector")
    assert s.peak("fp32", "vector") >= s.peak("fp64", "vector")
    for dt in DTYPES:
        assert s.peak(dt, "matrix") >= s.peak(dt, "vector") > 0
    # lower precision is never slower on the matrix unit
    assert s.peak("fp8") >= s.peak("bf16") >= s.peak("tf32") >= s.peak("fp32", "vector")
    assert s.memory and all(m.bandwidth > 0 for m in s.memory)
    assert all(m.capacity_bytes is None or m.capacity_bytes > 0 for m in s.memory)
    # inner levels are smaller and faster than the outermost
    for inner in s.memory[1:]:
        assert inner.bandwidth > s.memory[0].bandwidth
        assert (
            s.memory[0].capacity_bytes is None or inner.capacity_bytes < s.memory[0].capacity_bytes
        )  # DRAM size unknown on the nominal CPU
    assert all(lk.bandwidth > 0 and 0 <= lk.latency < 1e-3 and lk.topology for lk in s.links)
    assert 0 < s.min_op_time < 1e-3
    assert s.sources and all(("http" in src) or ("NOMINAL" in src) for src in s.sources)
    if s.kind == "gpu":
        assert s.match.get("sm_count") and s.match.get("compute_capability") and s.match.get("memory_bytes")
        assert s.links and s.memory[0].name == "hbm"


@pytest.mark.parametrize("name", sorted(EXPECTED_PRESETS))
def test_every_number_has_a_source_comment(name):
    """Each numeric line of a preset's peaks/memory/links cites a source or says it is an assumption."""
    path = PRESETS_DIR / f"{name}.yaml"
    section = None
    for line in path.read_text().splitlines():
        if line and not line.startswith((" ", "#")):
            section = line.split(":")[0]
        if section not in ("peak_flops", "memory", "links", "min_op_time", "host_link"):
            continue
        key, _, rest = line.strip().partition(":")
        value = rest.split("#")[0].strip()
        if key in ("bandwidth", "latency", "min_op_time", "capacity_bytes") or key in DTYPES:
            if value in ("null", ""):
                continue
            assert "#" in rest, f"{name}: {line.strip()!r} has no source comment"
            note = rest.split("#", 1)[1]
            assert "[" in note or "assumption" in note or "nominal" in note, f"{name}: {line.strip()!r}"


# Spot checks against the datasheets (dense figures; NVIDIA's "with sparsity" ones halved).
SPOT = [
    # A100 datasheet: BF16/FP16 tensor 312 TFLOPS dense (624 sparse), TF32 156, FP32 19.5, FP64 tensor 19.5
    ("a100-sxm-40gb", "bf16", "matrix", 312 * T),
    ("a100-sxm-40gb", "tf32", "matrix", 156 * T),
    ("a100-sxm-40gb", "fp32", "vector", 19.5 * T),
    ("a100-sxm-40gb", "fp64", "matrix", 19.5 * T),
    ("a100-sxm-80gb", "fp16", "matrix", 312 * T),
    ("a100-sxm-80gb", "int8", "matrix", 624 * T),
    # H100 datasheet (SXM): BF16 1,979 sparse -> 989.5 dense; FP8 3,958 -> 1,979; FP32 67
    ("h100-sxm", "bf16", "matrix", 989.5 * T),
    ("h100-sxm", "fp8", "matrix", 1979 * T),
    ("h100-sxm", "fp32", "vector", 67 * T),
    # H100 PCIe: BF16 1,513 sparse -> 756.5; FP32 51
    ("h100-pcie", "bf16", "matrix", 756.5 * T),
    ("h100-pcie", "fp32", "vector", 51 * T),
    # H200: same compute as H100 SXM
    ("h200", "bf16", "matrix", 989.5 * T),
    # B200 (HGX B200 per GPU): FP16/BF16 4.5 PF sparse -> 2.25 PF dense; FP8 9 -> 4.5; TF32 2.2 -> 1.1
    ("b200", "bf16", "matrix", 2250 * T),
    ("b200", "fp8", "matrix", 4500 * T),
    ("b200", "tf32", "matrix", 1100 * T),
    ("b200", "fp32", "vector", 75 * T),
    # V100 datasheet (SXM2): tensor 125, FP32 15.7, FP64 7.8
    ("v100-sxm2-32gb", "fp16", "matrix", 125 * T),
    ("v100-sxm2-32gb", "fp32", "vector", 15.7 * T),
    ("v100-sxm2-16gb", "fp64", "vector", 7.8 * T),
    # MI300X data sheet: FP16/BF16 1307.4 dense, FP8 2614.9 dense, FP32 vector 163.4, FP64 vector 81.7
    ("mi300x", "bf16", "matrix", 1307.4 * T),
    ("mi300x", "fp8", "matrix", 2614.9 * T),
    ("mi300x", "fp32", "vector", 163.4 * T),
    ("mi300x", "fp64", "vector", 81.7 * T),
    # MI250X data sheet, per package: FP16 383, FP64 vector 47.9 -> per GCD half
    ("mi250x", "fp16", "matrix", 383 / 2 * T),
    ("mi250x", "fp64", "vector", 47.9 / 2 * T),
]


@pytest.mark.parametrize("name,dtype,unit,value", SPOT)
def test_spot_peaks(name, dtype, unit, value):
    assert load_spec(name).peak(dtype, unit) == pytest.approx(value)


@pytest.mark.parametrize(
    "name,hbm",
    [
        ("v100-sxm2-16gb", 900 * G),
        ("v100-sxm2-32gb", 900 * G),
        ("a100-sxm-40gb", 1555 * G),  # A100 datasheet, 40 GB SXM
        ("a100-sxm-80gb", 2039 * G),  # A100 datasheet, 80 GB SXM
        ("h100-sxm", 3350 * G),  # H100 datasheet, 3.35 TB/s
        ("h100-pcie", 2000 * G),
        ("h200", 4800 * G),
        ("b200", 7700 * G),  # HGX B200 per GPU 7.7 TB/s
        ("mi250x", 3276.8 / 2 * G),
        ("mi300x", 5300 * G),
    ],
)
def test_spot_hbm(name, hbm):
    s = load_spec(name)
    assert s.bandwidth("hbm") == pytest.approx(hbm)
    assert s.bandwidth() == s.bandwidth("hbm")


@pytest.mark.parametrize(
    "name,link",
    [
        ("v100-sxm2-32gb", 150 * G),
        ("a100-sxm-40gb", 300 * G),
        ("h100-sxm", 450 * G),
        ("h200", 450 * G),
        ("b200", 900 * G),
        ("mi300x", 448 * G),
    ],
)
def test_spot_link_per_direction(name, link):
    assert load_spec(name).links[0].bandwidth == pytest.approx(link)


# Host links, per direction: PCIe lanes x rate x 128b/130b / 8 bits (PCI-SIG base specifications):
# Gen3 x16 16 x 8e9 x 128/130 / 8 = 15.754 GB/s, Gen4 twice that, Gen5 four times.
@pytest.mark.parametrize(
    "name,link,gbps",
    [
        ("v100-sxm2-16gb", "pcie3-x16", 15.754),
        ("v100-sxm2-32gb", "pcie3-x16", 15.754),
        ("a100-sxm-40gb", "pcie4-x16", 31.508),
        ("a100-sxm-80gb", "pcie4-x16", 31.508),
        ("mi250x", "pcie4-x16", 31.508),
        ("h100-sxm", "pcie5-x16", 63.015),
        ("h100-pcie", "pcie5-x16", 63.015),
        ("h200", "pcie5-x16", 63.015),
        ("b200", "pcie5-x16", 63.015),
        ("mi300x", "pcie5-x16", 63.015),
    ],
)
def test_spot_host_link_per_direction(name, link, gbps):
    s = load_spec(name)
    assert (s.host_link.name, s.host_link.topology) == (link, "host")
    assert s.host_link.bandwidth == pytest.approx(16 * 8e9 * 128 / 130 / 8 * gbps / 15.754, rel=1e-4)
    assert from_dict(s.to_dict()).host_link == s.host_link  # written and read back
    assert load_spec("generic-x86-cpu").host_link is None  # the CPU is the host


def test_capacities():
    assert load_spec("a100-sxm-40gb").memory[0].capacity_bytes == 40 * 2**30
    assert load_spec("a100-sxm-80gb").memory[0].capacity_bytes == 80 * 2**30
    assert load_spec("a100-sxm-40gb").memory[1].capacity_bytes == 40 * 2**20  # 40 MB L2
    assert load_spec("mi300x").memory[0].capacity_bytes == 192 * 2**30


def test_peak_fallbacks():
    v100 = load_spec("v100-sxm2-32gb")
    assert v100.peak("bf16") == v100.peak("fp32", "vector")  # no bf16 tensor cores
    assert v100.peak("tf32") == v100.peak("fp32", "vector")  # no TF32
    assert v100.peak("fp8") == v100.peak("fp32", "vector")  # fp8 -> bf16 -> fp32
    assert v100.peak("fp64") == 7.8 * T  # no fp64 tensor cores -> vector
    a100 = load_spec("a100-sxm-40gb")
    assert a100.peak("fp8") == 312 * T  # no fp8 -> bf16 tensor
    assert a100.peak("fp4") == 312 * T
    assert a100.peak("fp16", "vector") == 78 * T
    h100 = load_spec("h100-sxm")
    assert h100.peak("fp16", "vector") == 67 * T  # vector never falls back to matrix
    # torch-style names and unknown dtypes
    assert a100.peak("torch.bfloat16") == 312 * T
    assert a100.peak("c10::Half") == 312 * T
    assert h100.peak("float8_e4m3fn") == 1979 * T
    assert a100.peak("int64", "vector") == 19.5 * T
    cpu = load_spec("generic-x86-cpu")
    assert cpu.peak("bf16") == cpu.peak("fp32", "vector")
    with pytest.raises(ValueError):
        a100.peak("fp32", "tensor")
    with pytest.raises(KeyError):
        a100.bandwidth("l3")
    assert a100.bandwidth("l2") > a100.bandwidth("hbm")


def test_spec_is_frozen_hashable_picklable():
    s = load_spec("h100-sxm")
    with pytest.raises(Exception):
        s.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        s.peak_flops["matrix"]["bf16"] = 1.0  # type: ignore[index]
    assert hash(s) == hash(load_spec("h100-sxm"))
    assert pickle.loads(pickle.dumps(s)) == s
    json.dumps(s.to_dict())


def test_roundtrip(tmp_path):
    for name in presets():
        s = load_spec(name)
        assert load_spec(save_spec(s, tmp_path / f"{name}.yaml")) == s
    assert load_spec("A100_SXM_40GB").name == "a100-sxm-40gb"


def test_describe():
    rows = describe(load_spec("a100-sxm-40gb"))
    d = dict(rows)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in rows)
    assert d["peak matrix bf16"] == "312 TFLOP/s"
    assert d["peak matrix int8"] == "624 TOP/s"
    assert d["memory hbm"] == "42.9 GB, 1,555 GB/s"  # 40 GiB = 40 * 2**30 B = 42.9e9 B (decimal SI, one base)
    assert d["link nvlink3"].startswith("300 GB/s per direction")
    assert d["min op time"] == "1 µs"
    assert d["host link pcie4-x16"] == "31.51 GB/s per direction"
    assert any(k.startswith("source") and "datasheet" in v for k, v in rows)
    assert dict(describe(load_spec("h100-sxm")))["peak matrix bf16"] == "989.5 TFLOP/s"


# ------------------------------------------------------------------------------------------
# Matching real traces' deviceProperties


def _device_properties(folder: str) -> list[dict]:
    files = sorted((TRACES / folder).glob("*.json.gz"))
    if not files:
        pytest.skip(f"real traces not available: {TRACES / folder}")
    with gzip.open(files[0], "rt") as f:
        return json.load(f)["deviceProperties"]


@pytest.mark.parametrize(
    "folder,expected",
    [
        ("dlrm_8rank_v100", "v100-sxm2-32gb"),
        ("ddp_allreduce_v100", "v100-sxm2-32gb"),
        ("resnet50_legacy_v100", "v100-sxm2-32gb"),  # 'Tesla V100-DGXS-32GB'
        ("nccl_meta_a100", "a100-sxm-40gb"),  # 'NVIDIA A100-PG509-200', totalGlobalMem 42.3e9
        ("b200_eager", "b200"),
        ("sglang_qwen3_decode_mi300x", "mi300x"),
        ("sglang_qwen3_prefill_mi300x", "mi300x"),
        ("vllm_graphs_mi300x", "mi300x"),  # name '' : the numbers decide
    ],
)
def test_real_traces_match(folder, expected):
    props = _device_properties(folder)
    assert props
    for p in props:
        spec = match_properties(p)
        assert spec is not None and spec.name == expected, (p.get("name"), spec and spec.name)


def test_match_device_by_numbers():
    assert match_device("NVIDIA A100-SXM4-80GB", 108, "8.0", 85_100_000_000).name == "a100-sxm-80gb"
    assert match_device("NVIDIA A100-SXM4-40GB", 108, "8.0", 42_300_000_000).name == "a100-sxm-40gb"
    assert match_device("NVIDIA H100 80GB HBM3", 132, "9.0", 85_000_000_000).name == "h100-sxm"
    assert match_device("NVIDIA H100 PCIe", 114, "9.0", 85_000_000_000).name == "h100-pcie"
    assert match_device("", 114, "9.0", 85_000_000_000).name == "h100-pcie"
    assert match_device("NVIDIA H200", 132, "9.0", 150_100_000_000).name == "h200"
    assert match_device("", 304, "9.4", 206_141_652_992).name == "mi300x"
    assert match_device("AMD Instinct MI250X", 110, "9.0", 68_702_699_520).name == "mi250x"
    assert match_device("Tesla V100-SXM2-16GB", 80, "7.0", 16_900_000_000).name == "v100-sxm2-16gb"
    # name alone, when no numbers are recorded
    assert match_device("NVIDIA B200", 0, "", 0).name == "b200"
    # numbers contradicting every preset, or a part we have no preset for
    assert match_device("NVIDIA A100-SXM4-40GB", 80, "8.0", 42_300_000_000) is None
    assert match_device("NVIDIA L40S", 142, "8.9", 48_000_000_000).name == "l40s"  # issue 10 added its preset
    assert (
        match_device("NVIDIA RTX 6000 Ada", 142, "8.9", 48_000_000_000).name == "l40s"
    )  # same numbers: stands in (said in hardware_notes)
    assert match_device("NVIDIA A100 80GB PCIe", 108, "8.0", 85_100_000_000) is None  # excluded by name
    assert match_device("NVIDIA H100 NVL", 132, "9.0", 99_000_000_000) is None
    # ambiguous: one number pins several presets
    assert match_device("", 0, "9.0", 0) is None
    assert match_device("", 0, "", 0) is None


# ------------------------------------------------------------------------------------------
# Bad input


def _assert_one_line(e: InputError, path: Path, needle: str):
    msg = str(e)
    assert "\n" not in msg and str(path) in msg and needle in msg, msg


def test_bad_yaml(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: x\nkind: [gpu\nvendor: y\n")
    with pytest.raises(InputError) as ei:
        load_spec(p)
    _assert_one_line(ei.value, p, "invalid YAML")


def test_missing_file(tmp_path):
    p = tmp_path / "nope.yaml"
    with pytest.raises(InputError) as ei:
        load_spec(p)
    _assert_one_line(ei.value, p, "no such file")
    with pytest.raises(InputError):
        load_spec("no-such-preset")


def _good() -> dict:
    return load_spec("a100-sxm-40gb").to_dict()


@pytest.mark.parametrize(
    "mutate,needle",
    [
        (lambda d: d.pop("peak_flops"), "peak_flops"),
        (lambda d: d.update(kind="tpu"), "kind"),
        (lambda d: d["peak_flops"]["matrix"].update(bf16=-1), "peak_flops.matrix.bf16"),
        (lambda d: d["peak_flops"]["matrix"].update(bf16="fast"), "peak_flops.matrix.bf16"),
        (lambda d: d["peak_flops"]["matrix"].update(fp12=1e12), "fp12"),
        (lambda d: d["peak_flops"]["vector"].pop("fp32"), "vector.fp32"),
        (lambda d: d["memory"][0].update(bandwidth=0), "memory[0].bandwidth"),
        (lambda d: d.update(memory=[]), "memory"),
        (lambda d: d["links"][0].pop("topology"), "links[0].topology"),
        (lambda d: d.update(min_op_time=4), "min_op_time"),
        (lambda d: d.update(bogus=1), "bogus"),
        (lambda d: d.update(host_link={"name": "pcie4-x16", "bandwidth": 0}), "host_link.bandwidth"),
        (lambda d: d.update(host_link="pcie"), "host_link must be a mapping"),
        (lambda d: d["match"].update(names=["(unclosed"]), "regex"),
    ],
)
def test_invalid_spec(tmp_path, mutate, needle):
    d = _good()
    mutate(d)
    p = tmp_path / "spec.yaml"
    p.write_text(yaml.safe_dump(d))
    with pytest.raises(InputError) as ei:
        load_spec(p)
    _assert_one_line(ei.value, p, needle)


def test_not_a_mapping(tmp_path):
    p = tmp_path / "list.yaml"
    p.write_text("- 1\n- 2\n")
    with pytest.raises(InputError) as ei:
        load_spec(p)
    _assert_one_line(ei.value, p, "mapping")
    with pytest.raises(ValueError):
        from_dict(None)


@pytest.mark.parametrize("name", sorted(EXPECTED_PRESETS))
def test_match_block_read_alone_is_the_presets(name):
    # matching a device parses only each preset's `match:` block; it must be the block the whole
    # file gives (lists frozen to tuples there), or a preset could match differently than it reads
    from profiler.model.hardware import _freeze, preset_match

    assert _freeze(preset_match(name)) == load_spec(name).match
    assert preset_match(name) or name == "generic-x86-cpu"


def test_matching_loads_only_the_winner(monkeypatch):
    import profiler.model.hardware as hw
    import profiler.model.hardware_match as hm

    loaded = []
    monkeypatch.setattr(hm, "_preset", lambda name: loaded.append(name) or hw._preset(name))
    assert match_device("Tesla V100-SXM2-32GB", 80, "7.0", 34089730048).name == "v100-sxm2-32gb"
    assert loaded == ["v100-sxm2-32gb"]  # not the other ten presets


GPU_PRESETS = sorted(n for n in presets() if load_spec(n).kind == "gpu")


@pytest.mark.parametrize("name", GPU_PRESETS)
def test_every_gpu_lists_its_cache_levels_or_says_why_not(name):
    """L2 and shared memory / LDS for every GPU preset whose vendor publishes them (or the per-SM/CU
    figures they derive from); otherwise a comment in the YAML says why they are left out."""
    levels = [m.name for m in load_spec(name).memory]
    text = (PRESETS_DIR / f"{name}.yaml").read_text()
    if "l2" not in levels:
        assert "# No l2 or smem level:" in text
    elif levels[-1] not in ("smem", "lds"):  # L2, then the per-SM/CU level, or the reason it is left out
        assert levels[-1] == "l2" and "# No lds level:" in text


def test_amd_l2_and_lds_from_amd_profiler_peaks():
    # rocprofiler-compute's peaks: L2 = 128 B/clk x 16 channels/XCD x 8 XCDs x clock,
    # LDS = 128 B/clk/CU x CUs x clock. MI300X/MI325X: 304 CUs at 2100 MHz; MI355X: 256 CUs at 2400 MHz
    for name, cus, hz, lds_kib in (("mi300x", 304, 2.1e9, 64), ("mi325x", 304, 2.1e9, 64), ("mi355x", 256, 2.4e9, 160)):
        s = load_spec(name)
        assert [m.name for m in s.memory] == ["hbm", "infinity_cache", "l2", "lds"]
        assert s.bandwidth("l2") == pytest.approx(128 * 16 * 8 * hz)  # 34.41 TB/s at 2.1 GHz
        assert s.bandwidth("lds") == pytest.approx(128 * cus * hz)  # 81.72 TB/s for MI300X
        lds = s.memory[3]
        assert lds.capacity_bytes == lds_kib * 1024 * cus and lds.partitions == cus
        assert s.memory[2].capacity_bytes == 32 * 2**20 and s.memory[2].partitions == 8
        # the clock is the one the dense BF16 peak implies: CDNA 3 2048, CDNA 4 4096 FLOP/clk/CU
        assert s.peak("bf16") / (cus * hz) == pytest.approx(2048 if name != "mi355x" else 4096, rel=1e-3)


@pytest.mark.parametrize("name", GPU_PRESETS)
def test_no_inner_level_can_floor_a_gemm_above_its_compute_time(name):
    """An inner cache level (L2, Infinity Cache, shared memory / LDS) can raise a GEMM's memory
    floor but never its bound: per FLOP, the I/O lower bound there (analysis.memory_levels: e /
    sqrt(S) bytes per FLOP, S the next level's elements per instance) over that level's bandwidth
    stays below 1 / matrix peak for every dtype. Only DRAM/HBM (level 0) floors a GEMM as memory
    bound: ops are floored by DRAM unless evidence says otherwise."""
    from profiler.model.dtypes import ELEMENT_BYTES

    s = load_spec(name)
    for i in range(1, len(s.memory) - 1):
        inner = s.memory[i + 1]
        for dtype in s.peak_flops["matrix"]:
            e = ELEMENT_BYTES.get(dtype)
            if e is None or not inner.capacity_bytes:
                continue
            per_flop_s = e / (inner.capacity_bytes / inner.partitions / e) ** 0.5 / s.memory[i].bandwidth
            assert per_flop_s < 1 / s.peak(dtype, "matrix"), (name, s.memory[i].name, dtype)
