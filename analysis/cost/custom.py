"""Cost formulas for the custom ops of LLM-serving stacks, and for legacy ATen ops.

Serving stacks call their own kernels through ``torch.ops`` (vLLM's ``_C::``, ``_C_cache_ops::``,
SGLang's ``sgl_kernel::``/``sglang::``, AMD's ``aiter::``); Kineto records them like ATen ops,
with ``Input Dims``, ``Input type`` and ``Concrete Inputs``. `CUSTOM_OPS` maps their recorded
names (namespace included) to a formula; the signatures are the ops' schemas as the projects
register them (vLLM ``csrc/torch_bindings.cpp``, sgl-kernel ``csrc/common_extension_rocm.cc``,
SGLang ``jit_kernel/kvcache.py``, aiter ``aiter/ops/rmsnorm.py``). Conventions are
`analysis.cost`'s (rms_norm 3 FLOPs per element + 1 for the weight, elementwise 1 per output
element, compulsory bytes: every tensor read once, every output written once).

What stays unknown, and why (the record does not determine the work):

- ``vllm::moe_forward(hidden_states, router_logits, layer_name)`` from its own record alone: the
  expert weights are attributes of the layer named by a string, not inputs, so their shapes (and
  dtype: MXFP4, FP8 ...) are not recorded. `analysis.cost.moe` sizes it from the ops and kernels
  it nests; where those do not say, it stays unknown with the quantity missing.
- ``vllm::unified_attention_with_output(query, key, value, output, layer_name, ...)``: the KV
  cache and the per-request sequence lengths come from the forward context, not the arguments.
- ``aiter::mha_batch_prefill(q, k, v, cu_seqlens_q, kv_indptr, kv_page_indices, max_seqlen_q,
  max_seqlen_k, ...)``: varlen/paged attention; FLOPs are sum_i Lq_i * Lk_i over requests, and
  the lengths are the *values* of cu_seqlens_q / kv_indptr, which Kineto does not record (only
  their maxima are Concrete Inputs). The page-index count bounds sum_i Lk_i only from above.
- ``symm_mem::*all_reduce*`` ops are collectives: `analysis.cost.comm.collective_kind` names them.

`LEGACY_ATEN` covers ATen ops seen in legacy (2021, no Concrete Inputs) traces whose record is
enough; ops whose record lacks a size that a related record holds are costed by
`analysis.cost.joins`.
"""

from __future__ import annotations

from collections.abc import Callable

from analysis.cost.base import Cost, Args, numel, Unknown

# ---------------------------------------------------------------------------- norms


def _rms_norm_out(a: Args, name: str) -> Cost:
    # vLLM _C::rms_norm(Tensor! result, Tensor input, Tensor weight, float epsilon);
    # aiter::rmsnorm(Tensor out, Tensor input, Tensor weight, float epsilon).
    # FLOPs = 4 per element (square, sum, multiply by 1/rms: 3, as aten::rms_norm; weight: 1).
    # Reads input and weight; writes result (input-shaped, in result's dtype).
    x, w = a.shape(1), a.shape(2)
    if numel(a.shape(0)) != numel(x) or not x or w[-1:] != x[-1:]:
        raise Unknown
    n = numel(x)
    return Cost.of(4 * n, a.nbytes(1) + a.nbytes(2), a.nbytes(0), "norm", a.dtype(1))


def _fused_add_rms_norm(a: Args, name: str) -> Cost:
    # vLLM _C::fused_add_rms_norm(Tensor! input, Tensor! residual, Tensor weight, float epsilon),
    # in place: residual <- input + residual; input <- rms_norm(residual) * weight.
    # FLOPs = 5 per element (the add 1 + rms_norm 4). Reads input, residual, weight; writes
    # input and residual (both outputs are kept).
    x, r, w = a.shape(0), a.shape(1), a.shape(2)
    if numel(r) != numel(x) or not x or w[-1:] != x[-1:]:
        raise Unknown
    return Cost.of(5 * numel(x), a.nbytes(0) + a.nbytes(1) + a.nbytes(2), a.nbytes(0) + a.nbytes(1), "norm", a.dtype(0))


def _add_rmsnorm_out(a: Args, name: str) -> Cost:
    # aiter::add_rmsnorm(Tensor out, Tensor input, Tensor residual_in, Tensor residual_out,
    # Tensor weight, float epsilon): residual_out <- input + residual_in;
    # out <- rms_norm(residual_out) * weight. FLOPs = 5 per element (add 1 + rms_norm 4).
    # Reads input, residual_in, weight; writes out and residual_out.
    x, w = a.shape(1), a.shape(4)
    if any(numel(a.shape(i)) != numel(x) for i in (0, 2, 3)) or not x or w[-1:] != x[-1:]:
        raise Unknown
    return Cost.of(5 * numel(x), a.nbytes(1) + a.nbytes(2) + a.nbytes(4), a.nbytes(0) + a.nbytes(3), "norm", a.dtype(1))


# ---------------------------------------------------------------------------- activations


def _act_and_mul(a: Args, name: str) -> Cost:
    # silu_and_mul / gelu_and_mul / gelu_tanh_and_mul(Tensor! out, Tensor input[, bool enable_pdl]):
    # input [..., 2d] -> out [..., d] = act(input[..., :d]) * input[..., d:].
    # FLOPs = 2 per output element (the activation 1, transcendental counted 1; the multiply 1).
    # Reads the input once (2d per row); writes out.
    out, x = a.shape(0), a.shape(1)
    if not x or out[:-1] != x[:-1] or 2 * out[-1] != x[-1]:
        raise Unknown
    return Cost.of(2 * numel(out), a.nbytes(1), a.nbytes(0), "elementwise", a.dtype(1))


# ---------------------------------------------------------------------------- rotary


def _rotary_embedding(a: Args, name: str) -> Cost:
    # rotary_embedding(Tensor positions, Tensor! query, Tensor!? key, int head_size,
    # Tensor cos_sin_cache, bool is_neox), in place (vLLM _C::, sgl_kernel::; vLLM
    # csrc/pos_encoding_kernels.cu): tokens = numel(positions); heads = numel(query) /
    # (tokens * head_size) (key: its own head count, none when key is None); rot_dim =
    # cos_sin_cache.shape[1] (cos and sin halves of rot_dim/2 each). Each rotated pair
    # (x, y) -> (x cos - y sin, y cos + x sin): 6 FLOPs per pair = 3 per rotated element, over
    # (Hq + Hk) * tokens * rot_dim elements. Reads positions, one cache row per token, and the
    # rotated part of every head; writes that part back (the head_size - rot_dim rest is
    # untouched).
    head = a.value(3)
    tokens = numel(a.shape(0))
    cache = a.shape(4)
    if not isinstance(head, int) or isinstance(head, bool) or head <= 0 or tokens <= 0 or len(cache) != 2:
        raise Unknown
    rot = cache[1]
    if rot % 2 or rot > head:
        raise Unknown

    def heads(i: int) -> int:
        if not a.is_tensor(i):
            return 0
        per_token, rem = divmod(numel(a.shape(i)), tokens * head)
        if rem:
            raise Unknown
        return per_token

    rotated = (heads(1) + heads(2)) * tokens * rot
    es = a.size(1)
    read = a.nbytes(0) + tokens * rot * a.size(4) + rotated * es
    return Cost.of(3 * rotated, read, rotated * es, "elementwise", a.dtype(1))


# ---------------------------------------------------------------------------- quantisation


def _static_scaled_fp8_quant(a: Args, name: str) -> Cost:
    # vLLM _C::static_scaled_fp8_quant(Tensor! result, Tensor input, Tensor scale[, group_shape]):
    # result = clamp(input / scale, fp8 range) -> fp8. FLOPs = 2 per element (the scaling, the
    # clamp; the conversion not counted, as quantize_per_tensor). Reads input and scale; writes
    # result (1 byte per element).
    if numel(a.shape(0)) != numel(a.shape(1)):
        raise Unknown
    n = numel(a.shape(1))
    return Cost.of(2 * n, a.nbytes(1) + a.nbytes(2), a.nbytes(0), "quant/cast", a.dtype(0))


# ---------------------------------------------------------------------------- KV-cache writes


def _reshape_and_cache(a: Args, name: str) -> Cost:
    # vLLM _C_cache_ops::reshape_and_cache(_flash)(Tensor key, Tensor value, Tensor! key_cache,
    # Tensor! value_cache, Tensor slot_mapping, str kv_cache_dtype, Tensor k_scale,
    # Tensor v_scale): scatters num_tokens = numel(slot_mapping) rows of key and value (key may
    # have more rows: CUDA-graph padding) into the caches. Bytes: reads those rows, the slot
    # mapping and the two scales; writes the same elements at the cache's element size. An fp8
    # cache (stored as uint8: its element size differs from key's) divides by the scale:
    # 1 FLOP per element, family quant/cast; otherwise a copy, 0 FLOPs. Slots of -1 (padding
    # tokens) are skipped by the kernel; how many there are is data, so every row counts.
    k, v = a.shape(0), a.shape(1)
    tokens = numel(a.shape(4))
    if not k or not v or tokens > min(k[0], v[0]):
        raise Unknown
    ke, ve = tokens * (numel(k) // k[0]), tokens * (numel(v) // v[0])
    read = ke * a.size(0) + ve * a.size(1) + a.nbytes(4) + a.nbytes(6) + a.nbytes(7)
    written = ke * a.size(2) + ve * a.size(3)
    convert = a.size(2) != a.size(0)
    return Cost.of((ke + ve) if convert else 0, read, written, "quant/cast" if convert else "copy", a.dtype(0))


def _store_cache(a: Args, name: str) -> Cost:
    # SGLang sglang::store_cache(Tensor k, Tensor v, Tensor! k_cache, Tensor! v_cache,
    # Tensor indices, *, int row_bytes=0, int num_split=0) (python/sglang/jit_kernel/kvcache.py):
    # copies row i of k and v to row indices[i] of the caches, rows = numel(indices), row_bytes
    # = k.shape[-1] * element size when 0. 0 FLOPs; reads the rows and indices, writes the rows.
    k, v = a.shape(0), a.shape(1)
    rows = numel(a.shape(4))
    if not k or k != v or rows != k[0]:
        raise Unknown
    row = numel(k) // k[0] * a.size(0)
    recorded = a.value(5, 0)
    if recorded not in (0, row):
        raise Unknown  # row_bytes disagrees with the shapes
    return Cost.of(0, 2 * rows * row + a.nbytes(4), 2 * rows * row, "copy", a.dtype(0))


#: Custom ops whose record does not determine their work (the module docstring): name -> why.
UNDERIVABLE: dict[str, str] = {
    "vllm::moe_forward": "MoE: expert weights are layer attributes, not op arguments, and routing is data",
    "vllm::moe_forward_shared": "MoE: expert weights are layer attributes, not op arguments, and routing is data",
    "vllm::unified_attention_with_output": "attention: the KV cache and per-request lengths come from the "
    "forward context, not the arguments",
    "vllm::unified_attention": "attention: the KV cache and per-request lengths come from the "
    "forward context, not the arguments",
    "aiter::mha_batch_prefill": "varlen attention: per-request lengths are tensor values Kineto does not record",
}

#: recorded name -> formula
CUSTOM_OPS: dict[str, Callable[[Args, str], Cost]] = {
    "_C::rms_norm": _rms_norm_out,
    "aiter::rmsnorm": _rms_norm_out,
    "_C::fused_add_rms_norm": _fused_add_rms_norm,
    "aiter::add_rmsnorm": _add_rmsnorm_out,
    "_C::silu_and_mul": _act_and_mul,
    "_C::gelu_and_mul": _act_and_mul,
    "_C::gelu_tanh_and_mul": _act_and_mul,
    "sgl_kernel::silu_and_mul": _act_and_mul,
    "sgl_kernel::gelu_and_mul": _act_and_mul,
    "sgl_kernel::gelu_tanh_and_mul": _act_and_mul,
    "_C::rotary_embedding": _rotary_embedding,
    "sgl_kernel::rotary_embedding": _rotary_embedding,
    "_C::static_scaled_fp8_quant": _static_scaled_fp8_quant,
    "_C_cache_ops::reshape_and_cache": _reshape_and_cache,
    "_C_cache_ops::reshape_and_cache_flash": _reshape_and_cache,
    "sglang::store_cache": _store_cache,
}


# ---------------------------------------------------------------------------- legacy ATen


def _pair(v, default: list[int] | None = None) -> list[int]:
    """An int or 1-/2-element list argument as two ints; [] takes `default` (stride = kernel)."""
    if v == [] and default is not None:
        return default
    v = [v] if isinstance(v, int) and not isinstance(v, bool) else v
    if not isinstance(v, list) or len(v) not in (1, 2) or not all(isinstance(i, int) for i in v):
        raise Unknown
    return v * 2 if len(v) == 1 else v


def _max_pool2d_with_indices(a: Args, name: str) -> Cost:
    # max_pool2d_with_indices(self, kernel_size, stride, padding, dilation, ceil_mode): output
    # spatial per dim as ATen's pooling_output_shape: (in + 2p - d(k-1) - 1 [+ s-1 with
    # ceil_mode]) // s + 1, less one when ceil_mode's last window would start past the input and
    # its left padding; stride [] means kernel_size. FLOPs = 1 per window element (a
    # comparison) = numel(out) * kh * kw. Reads self; writes out and its int64 indices.
    # Legacy traces record no Concrete Inputs: unknown there.
    x = a.shape(0)
    if len(x) not in (3, 4):
        raise Unknown
    k = _pair(a.value(1))
    s, p, d = _pair(a.value(2, []), k), _pair(a.value(3)), _pair(a.value(4, 1))
    ceil = bool(a.value(5, False))
    if min(k + s + d) <= 0 or min(p) < 0:
        raise Unknown
    out_sp = []
    for i, ki, si, pi, di in zip(x[-2:], k, s, p, d):
        o = (i + 2 * pi - di * (ki - 1) - 1 + (si - 1 if ceil else 0)) // si + 1
        if ceil and (o - 1) * si >= i + pi:
            o -= 1
        out_sp.append(o)
    if min(out_sp) <= 0:
        raise Unknown
    out = numel(x[:-2]) * numel(out_sp)
    return Cost.of(out * numel(k), a.nbytes(0), out * (a.size(0) + 8), "reduction", a.dtype(0))


def _max_pool2d_with_indices_backward(a: Args, name: str) -> Cost:
    # max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
    # ceil_mode, indices): grad_input (self-shaped) = 0, then grad_output[j] is added at
    # indices[j] (windows may overlap, so it accumulates): FLOPs = numel(grad_output). Reads
    # grad_output and indices; writes grad_input. self's values are not read (only its shape).
    go, x = a.shape(0), a.shape(1)
    if a.shape(7) != go or len(go) != len(x):
        raise Unknown
    return Cost.of(numel(go), a.nbytes(0) + a.nbytes(7), numel(x) * a.size(0), "copy", a.dtype(0))


#: ATen base name -> formula (registered by analysis.cost's table)
LEGACY_ATEN: dict[str, Callable[[Args, str], Cost]] = {
    "max_pool2d_with_indices": _max_pool2d_with_indices,
    "max_pool2d_with_indices_backward": _max_pool2d_with_indices_backward,
}
