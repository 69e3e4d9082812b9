"""The accelerator description: both presets load with the numbers their comments derive, and
a bad file is one line naming the field (InputError)."""

from __future__ import annotations

import pytest

from accelerator.hardware import PRESETS_DIR, load_accel, presets
from profiler.model.errors import InputError


def test_presets_load_with_their_derived_peaks():
    assert presets() == ["datacenter-npu", "edge-npu"]
    dc = load_accel("datacenter-npu")
    # TPU v4 chip: 8 MXUs x 128 x 128 MACs x 2 FLOP x 1.05 GHz = 275.25 TFLOP/s (Jouppi et al. 2023: 275)
    assert dc.matrix_peak_flops("bf16") == pytest.approx(275.25e12, rel=1e-4)
    assert dc.chips == 8 and dc.topology == "ring" and dc.link.bandwidth == 50e9
    assert dc.matrix.rows == dc.matrix.cols == 128 and dc.matrix.dataflow == "ws"
    edge = load_accel("Edge_NPU")  # case and '_' ignored
    # 4 cores x 32 x 32 int8 MACs x 2 x 1 GHz = 8.192 TOPS; no fp32 or fp8 on the matrix unit
    assert edge.matrix_peak_flops("int8") == pytest.approx(8.192e12)
    assert "fp32" not in edge.matrix_dtypes() and "fp8" not in edge.matrix_dtypes()
    assert edge.hbm.bandwidth == pytest.approx(8533e6 * 8)  # LPDDR5X-8533 x 64 bit
    assert edge.vector.ops_per_cycle["fp32"]["exp"] == 0.25


GOOD = PRESETS_DIR / "edge-npu.yaml"


@pytest.mark.parametrize(
    "old,new,message",
    [
        ("    rows: 32\n", "    rows: -1\n", "chip.core.matrix.rows must be a positive integer, not -1"),
        (
            "    bandwidth: 68.264e9 ",
            "    bandwidth: fast ",
            "chip.hbm.bandwidth must be a positive number, not 'fast'",
        ),
        ("      dataflow: ws ", "      dataflow: diagonal ", "chip.core.matrix.dataflow must be one of os, ws, is"),
        (
            "      stationary_buffers: 2 ",
            "      stationary_buffers: 3 ",
            "chip.core.matrix.stationary_buffers must be 1 or 2, not 3",
        ),
        ("clock_hz: 1.0e9 ", "clock: 1.0e9 ", "clock_hz is missing"),
        ("  topology: single ", "  topology: single\n  count2: 1 ", None),  # harmless extra key: loads
        ("        int8: 1024\n", "        int4: 1024\n", "macs_per_cycle.int4 is not a dtype"),
        ("  count: 1\n", "  count: 2\n", "chips.topology is single but chips.count is 2"),
        ("name: edge-npu\n", "name: [edge\n", "invalid YAML at line"),
    ],
)
def test_bad_description_is_one_line_naming_the_field(tmp_path, old, new, message):
    text = GOOD.read_text()
    assert old in text, old
    path = tmp_path / "bad.yaml"
    path.write_text(text.replace(old, new, 1))
    if message is None:
        assert load_accel(str(path)).name == "edge-npu"
        return
    with pytest.raises(InputError) as e:
        load_accel(str(path))
    assert message in str(e.value) and str(path) in str(e.value) and "\n" not in str(e.value)


def test_missing_file_names_the_presets(tmp_path):
    with pytest.raises(InputError, match="presets: datacenter-npu, edge-npu"):
        load_accel(str(tmp_path / "nope.yaml"))
