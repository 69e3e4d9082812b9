"""Mixture-of-experts costs: FLOPs and bytes of an MoE layer from its op and what it nests.

An MoE layer with E experts routes each of T tokens to its top K experts; each expert is a
gated MLP (SwiGLU: gate and up projections H -> I, an activation, a down projection I -> H).
Per routed token: gate + up = 2 * H * I multiply-adds, down = I * H, so

    FLOPs = 2 * T * K * (3 * H * I)                       (one multiply-add = 2 FLOPs)

(router and top-k selection, the activation and the weighted sum of the K outputs are O(T * E)
and O(T * K * H), negligible beside it and not counted). Compulsory bytes: the weights of every
expert at least one token reaches, at most min(E, T * K) experts (which ones is data: the
routing; the upper bound is used, as a batch of T * K >= E routed tokens touches all experts in
practice), each 3 * H * I elements at the weight format's bytes per element (block scales
included); plus the activations: hidden states [T, H] and router logits [T, E] read, the output
[T, H] written. Intermediate activations between the two GEMMs are not compulsory (a fused
kernel keeps them on chip), as everywhere in `analysis.cost`.

Where the quantities come from:

- ``vllm::moe_forward(hidden_states [T, H], router_logits [T, E], layer_name)`` records T, H and
  E; the expert weights are attributes of the layer named by a string, so K, I and the weight
  format are read from what the op nests (`moe_forward_cost`): K from the top-k buffers it
  allocates ([T, K], 1 <= K < E); I from the per-routed-row buffers between the two GEMMs
  ([rows >= T * K, I], widths other than H; a gate-up buffer of width 2I beside one of width I
  means I), or from a nested ``*_and_mul`` activation op (out [rows, I], input [rows, 2I]); the
  weight format from the GEMM kernels it launches, named by TensorRT-LLM's batched-GEMM
  generator as ``bmm_<out>_<A><B>_<acc>_...`` (e.g. ``bmm_Bfloat16_MxE2m1MxE4m3_Fp32_...``:
  operands MXFP4 and MXFP8). The narrower operand is the weight (weight-only and weight-and-
  activation quantization store weights at least as narrow as activations); the wider one sets
  the tensor-core rate (Blackwell runs FP4 x FP8 MMAs at the FP8 rate, its f8f6f4 kind).
  What is not found is said by `moe_forward_reason`, for the unknown table.
- ``{vllm,sglang}::{in,out}place_fused_experts(hidden_states, w1, w2, topk_weights, topk_ids,
  ...)`` record the weights as arguments (`fused_experts_cost`).
- ``aten::_grouped_mm(self, mat2, offs, bias, out_dtype)`` records its operands: each row of a
  2-D ``self`` [M, K] multiplies one group's [K, N] of a 3-D ``mat2`` [G, K, N] (2 * M * K * N
  FLOPs, every group's weights read: which groups are empty is data); 3-D x 3-D is a batched
  GEMM (2 * G * M * K * N); 2-D x 2-D splits K into G groups, out [G, M, N] (2 * M * K * N).
"""

from __future__ import annotations

import re

import pandas as pd

from analysis.cost.base import Args, Cost, SCALAR_TYPES, DTYPES, Unknown, numel, parse_concrete

#: op name -> formula over (the op's record, the nested records) (`moe_forward_cost`)
NESTED_MOE = ("vllm::moe_forward",)
_ALLOC = {"aten::empty", "aten::empty_strided", "aten::zeros", "aten::ones", "aten::full"}
_ACT_AND_MUL = re.compile(r"(?:silu|gelu|gelu_tanh|swiglu)_and_mul$")
# TensorRT-LLM batched-GEMM kernel names: bmm_<out>_<A><B>_<acc>_t<tile>...
_TYPE = r"(?:Mx)?(?:E2m1|E4m3|E5m2|Bfloat16|Fp16|Fp32)"
_TRTLLM_BMM = re.compile(rf"^bmm_{_TYPE}_({_TYPE})({_TYPE})_Fp32_")
#: operand type -> (bytes per element with its block scale, our dtype name for the peak).
#: MX formats (OCP Microscaling Formats v1.0): one 1-byte E8M0 scale per 32 elements;
#: NVFP4 (plain E2m1 in these names): one 1-byte E4M3 scale per 16 elements.
_OPERAND: dict[str, tuple[float, str]] = {
    "MxE2m1": (0.5 + 1 / 32, "fp4"),
    "E2m1": (0.5 + 1 / 16, "fp4"),
    "MxE4m3": (1 + 1 / 32, "fp8"),
    "MxE5m2": (1 + 1 / 32, "fp8"),
    "E4m3": (1.0, "fp8"),
    "E5m2": (1.0, "fp8"),
    "Bfloat16": (2.0, "bf16"),
    "Fp16": (2.0, "fp16"),
    "Fp32": (4.0, "fp32"),
}


class Missing(Unknown):
    """Unknown, with what the record lacks (for the unknown table's reason)."""


def moe_forward_cost(op: Args, nested: list[tuple[str, Args]], kernels: list[str]) -> Cost:
    """Cost of one ``vllm::moe_forward`` (the module docstring) from its record, the ops nested in
    it as (name, Args) and the names of the kernels it launched; raises `Missing` saying what
    is not recorded."""
    x, logits = op.shape(0), op.shape(1)
    if len(x) != 2 or len(logits) != 2 or logits[0] != x[0]:
        raise Missing("hidden states / router logits not [T, H] / [T, E]")
    t, h, e = x[0], x[1], logits[1]
    allocs = [_alloc(a) for n, a in nested if n in _ALLOC]
    sizes = [s for s in allocs if s is not None]
    ks = {s[1] for s in sizes if len(s) == 2 and s[0] == t and 1 <= s[1] < e}
    if len(ks) != 1:
        raise Missing(f"top-k: no single [T, K] top-k buffer among its nested ops (found K in {sorted(ks)})")
    k = ks.pop()
    inter = _intermediate(t * k, h, sizes, [a for n, a in nested if _ACT_AND_MUL.search(n.split("::")[-1])])
    w_bytes, dtype = _weight_format(kernels)
    experts = min(e, t * k)
    act = op.size(0)
    read = experts * 3 * h * inter * w_bytes + op.nbytes(0) + op.nbytes(1)
    return Cost.of(2 * t * k * 3 * h * inter, read, t * h * act, "gemm", dtype)


def _alloc(a: Args) -> list[int] | None:
    """The size list an allocation op (aten::empty(size, dtype, ...)) records, or None."""
    v = a.value(0, None)
    return v if isinstance(v, list) and v and all(isinstance(i, int) and i > 0 for i in v) else None


def _intermediate(routed: int, h: int, sizes: list[list[int]], acts: list[Args]) -> int:
    """I: from a nested *_and_mul op (out [rows, I], input [rows, 2I]), else from the widths of
    the per-routed-row buffers ([rows >= T*K, w]) other than H: one width w means I = w; two
    widths w and 2w mean the gate-up buffer (2I) and the activation buffer (I)."""
    for a in acts:
        out, inp = a.shape(0), a.shape(1)
        if out and inp and 2 * out[-1] == inp[-1] and numel(out[:-1]) >= routed:
            return out[-1]
    widths = {s[-1] for s in sizes if len(s) >= 2 and numel(s[:-1]) >= routed} - {h}
    if len(widths) == 1:
        return widths.pop()
    if len(widths) == 2 and 2 * min(widths) == max(widths):
        return min(widths)
    raise Missing(
        f"expert intermediate size: no per-routed-row buffer between the GEMMs among its nested ops "
        f"(widths other than H={h}: {sorted(widths)})"
    )


def _weight_format(kernels: list[str]) -> tuple[float, str]:
    """(bytes per weight element, scales included; the dtype whose peak bounds the GEMMs) from
    the GEMM kernels' names; all GEMM kernels must agree."""
    found = set()
    for name in kernels:
        m = _TRTLLM_BMM.match(name)
        if m:
            a, b = (_OPERAND[g] for g in m.groups())
            found.add((min(a, b)[0], max(a, b)[1]))
    if len(found) != 1:
        raise Missing("expert weight format: no launched GEMM kernel's name states its operand types")
    return found.pop()


def moe_forward_costs(rows: pd.DataFrame, tree: pd.DataFrame) -> tuple[dict, dict]:
    """({row index: Cost}, {row index: reason}) for the `NESTED_MOE` rows of `rows` (an events or
    units table with `name` and `id` or `unit_id`), from `tree` (the trace's events: `id`, `kind`,
    `name`, `ts`, `dur`, `rank`, `thread`, `op_id`, `shapes`, `dtypes`, `concrete`). The nested
    ops are the ops on the same host thread inside the op's interval; the kernels, the device
    work launched by the op or by one of them."""
    key = "id" if "id" in rows.columns else "unit_id" if "unit_id" in rows.columns else None
    need = {"id", "kind", "name", "ts", "dur", "rank", "thread", "op_id", "shapes", "dtypes"}
    costs: dict = {}
    reasons: dict = {}
    if key is None or not need <= set(tree.columns):
        return costs, reasons
    own = rows.index[rows["name"].astype(object).isin(NESTED_MOE).to_numpy()]
    if not len(own):
        return costs, reasons
    ops = tree[(tree["kind"] == "op").to_numpy()]
    by_id = tree.drop_duplicates("id").set_index("id")
    launched = tree[(tree["op_id"].to_numpy() >= 0) & (tree["kind"] != "op").to_numpy()]
    kernels_of = launched.groupby("op_id")["name"].agg(lambda s: [str(n) for n in s])
    for idx in own:
        uid = int(rows.at[idx, key])
        if uid not in by_id.index:
            continue
        r = by_id.loc[uid]
        inside = ops[
            (ops["rank"].to_numpy() == r["rank"])
            & (ops["thread"].to_numpy() == r["thread"])
            & (ops["ts"].to_numpy() >= r["ts"])
            & ((ops["ts"] + ops["dur"]).to_numpy() <= r["ts"] + r["dur"])
            & (ops["id"].to_numpy() != uid)
        ]
        nested = [
            (str(n), _args(s, d, c))
            for n, s, d, c in zip(inside["name"], inside["shapes"], inside["dtypes"], _col(inside, "concrete"))
        ]
        kernels = [k for i in [uid, *inside["id"].tolist()] for k in kernels_of.get(i, [])]
        try:
            costs[idx] = moe_forward_cost(_args(r["shapes"], r["dtypes"], _get(r, "concrete")), nested, kernels)
        except Missing as m:
            reasons[idx] = f"MoE: {m}; the expert weights are layer attributes, not op arguments"
        except (Unknown, IndexError, KeyError, TypeError, ValueError):
            reasons[idx] = "MoE: its record is not hidden states [T, H] and router logits [T, E]"
    return costs, reasons


def _col(df: pd.DataFrame, c: str):
    return df[c].astype(object) if c in df.columns else [None] * len(df)


def _get(r: pd.Series, c: str):
    return r[c] if c in r.index else None


def _args(shapes, dtypes, concrete) -> Args:
    return Args(_json(shapes) or [], _json(dtypes) or [], _json(concrete), None)


def _json(text):
    v = parse_concrete(text) if isinstance(text, str) and text else None
    return v if isinstance(v, list) else None


# ---------------------------------------------------------------------------- grouped GEMM


def grouped_mm_cost(a: Args, name: str) -> Cost:
    # aten::_grouped_mm(Tensor self, Tensor mat2, Tensor? offs, Tensor? bias, ScalarType? out_dtype)
    # (the module docstring's three layouts). Bytes: self, mat2, offs and bias read once; the
    # output written in out_dtype (Concrete Inputs: a c10::ScalarType number) or self's dtype.
    s, w = a.shape(0), a.shape(1)
    if len(s) == 2 and len(w) == 3 and s[1] == w[1]:
        m, kk, n = s[0], s[1], w[2]
        flops, out = 2 * m * kk * n, m * n
    elif len(s) == 3 and len(w) == 3 and s[0] == w[0] and s[2] == w[1]:
        flops, out = 2 * s[0] * s[1] * s[2] * w[2], s[0] * s[1] * w[2]
    elif len(s) == 2 and len(w) == 2 and s[1] == w[0] and a.is_tensor(2):
        g = numel(a.shape(2))
        flops, out = 2 * s[0] * s[1] * w[1], g * s[0] * w[1]
    else:
        raise Unknown
    out_dtype = a.value(4, None)
    size = DTYPES[SCALAR_TYPES[out_dtype]][1] if isinstance(out_dtype, int) and out_dtype in SCALAR_TYPES else a.size(0)
    read = a.nbytes(0) + a.nbytes(1) + a.nbytes(2) + a.nbytes(3)
    return Cost.of(flops, read, out * size, "gemm", a.dtype(0))


# ---------------------------------------------------------------------------- fused experts


def fused_experts_cost(a: Args, name: str) -> Cost:
    # vLLM / SGLang {in,out}place_fused_experts(hidden_states [T, H], w1 [E, N1, H], w2 [E, H, I],
    # topk_weights [T, K], topk_ids [T, K], ...): the weights are arguments. N1 = 2I (gated:
    # gate and up) or I (not gated): FLOPs = 2 * T * K * H * (N1 + I) (= the module docstring's
    # 2 * T * K * 3 * H * I when gated). Bytes: the weights of min(E, T*K) experts, hidden
    # states and top-k tensors read; the output [T, H] written. Only the unquantized form
    # (weights in the hidden states' dtype): a quantized one's compute dtype is set by flags whose
    # position differs between versions. With expert parallelism (an expert_map: a 1-D int32
    # tensor argument) tokens routed to other ranks' experts are skipped, which is data: unknown.
    x, w1, w2, ids = a.shape(0), a.shape(1), a.shape(2), a.shape(4)
    if len(x) != 2 or len(w1) != 3 or len(w2) != 3 or len(ids) != 2 or ids[0] != x[0] or a.shape(3) != ids:
        raise Unknown
    (t, h), (e, n1, _), inter, k = x, w1, w2[2], ids[1]
    if w1[2] != h or w2[:2] != [e, h] or n1 not in (inter, 2 * inter) or not (a.dtype(1) == a.dtype(2) == a.dtype(0)):
        raise Unknown
    if any(a.is_tensor(i) and len(a.shape(i)) == 1 and a.dtypes[i] == "int" for i in range(5, len(a.shapes))):
        raise Unknown  # an expert_map
    weights = min(e, t * k) * (a.nbytes(1) + a.nbytes(2)) // e
    read = weights + a.nbytes(0) + a.nbytes(3) + a.nbytes(4)
    return Cost.of(2 * t * k * h * (n1 + inter), read, t * h * a.size(0), "gemm", a.dtype(0))


#: recorded name -> formula (registered with the custom ops by analysis.cost.ops)
FUSED_EXPERTS = {
    f"{ns}::{kind}_fused_experts": fused_experts_cost for ns in ("vllm", "sglang") for kind in ("inplace", "outplace")
}
