"""IREE's fused attention op (iree_linalg_ext.attention, what IREE forms from
F.scaled_dot_product_attention) costed from its shapes, on a dispatch source in the layout
iree-compile dumps (the op line as IREE 3.13 prints it; no IREE needed). Sq != Sk and Dqk != Dv,
so a role read wrong changes the count."""

from __future__ import annotations

import pandas as pd
import torch
import torch.utils.flop_counter

from analysis.iree_dispatches import dispatch_table
from collectors.iree.dispatches import read_dispatches
from collectors.iree.runtime import EVENT_COLUMNS

B, H, SQ, SK, DQK, DV = 2, 3, 5, 7, 16, 8
Q, K, V, OUT = f"{B}x{H}x{SQ}x{DQK}xf32", f"{B}x{H}x{SK}x{DQK}xf32", f"{B}x{H}x{SK}x{DV}xf32", f"{B}x{H}x{SQ}x{DV}xf32"
LOC = 'loc("<top>"("/m/model.py":9:0))'
MAPS = ", ".join(
    f"affine_map<(d0, d1, d2, d3, d4, d5) -> ({r})>"
    for r in ("d0, d1, d2, d4", "d0, d1, d5, d4", "d0, d1, d5, d3", "", "d0, d1, d2, d3")
)
INS = f"ins(%4, %5, %6, %cst : tensor<{Q}>, tensor<{K}>, tensor<{V}>, f32)"
SOURCE = f"""hal.executable public @main$async_dispatch_0 {{
    hal.executable.export public @main$async_dispatch_0_attention ordinal(0) layout(#hal.pipeline.layout<bindings = []>)
      func.func @main$async_dispatch_0_attention() {{
        %0 = hal.interface.binding.subspan binding(0) : !iree_tensor_ext.dispatch.tensor<readonly:tensor<{Q}>>
        %1 = hal.interface.binding.subspan binding(1) : !iree_tensor_ext.dispatch.tensor<readonly:tensor<{K}>>
        %2 = hal.interface.binding.subspan binding(2) : !iree_tensor_ext.dispatch.tensor<readonly:tensor<{V}>>
        %3 = hal.interface.binding.subspan binding(3) : !iree_tensor_ext.dispatch.tensor<writeonly:tensor<{OUT}>>
        %7 = iree_linalg_ext.attention <indexing_maps = [{MAPS}]> {INS} outs(%8 : tensor<{OUT}>) {{
        ^bb0(%arg0: f32 {LOC}):
          iree_linalg_ext.yield %arg0 : f32 {LOC}
        }} -> tensor<{OUT}> {LOC}
        return {LOC}
      }} {LOC}
}}
"""


def test_attention_flops_and_bytes_from_shapes(tmp_path):
    (tmp_path / "module_main$async_dispatch_0.mlir").write_text(SOURCE)
    dispatches, ops = read_dispatches(tmp_path, ("/m/model.py",))
    assert ops["attention"].tolist() == [f"{B * H}x{SQ}x{SK}x{DQK}x{DV}"]
    t = dispatch_table(dispatches, ops, pd.DataFrame(columns=EVENT_COLUMNS))
    # the two matmuls, as torch.utils.flop_counter counts SDPA: 2*6*5*7*16 + 2*6*5*7*8 = 10,080
    q, k, v = torch.empty(B, H, SQ, DQK), torch.empty(B, H, SK, DQK), torch.empty(B, H, SK, DV)
    with torch.utils.flop_counter.FlopCounterMode(display=False) as fc:
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert fc.get_total_flops() == 10_080
    # + the softmax, 5 per score (scale, max, subtract, exp, sum): 5*6*5*7 = 1,050
    # + the normalisation, 1 divide per output element: 6*5*8 = 240
    assert t["flops"].tolist() == [10_080 + 1_050 + 240]
    assert t["family"].tolist() == ["attention"] and t["dtype"].tolist() == ["fp32"]
    # bytes: Q, K, V read and O written once, fp32: 4 * (480 + 672 + 336 + 240) = 6,912
    assert t["bytes"].tolist() == [4 * (B * H * SQ * DQK + B * H * SK * DQK + B * H * SK * DV + B * H * SQ * DV)]
    assert t["main_location"].tolist() == ["<top> /m/model.py:9"]
