"""Cost formulas for the compute-heavy families: GEMM, convolution, attention.

Conventions in `analysis.cost`; every formula sits beside its code.
"""

from __future__ import annotations

from analysis.cost.base import DTYPES, SCALAR_TYPES, Cost, Args, broadcast, numel, Unknown

# ---------------------------------------------------------------------------- gemm


def mm_cost(a: Args, name: str) -> Cost:
    # mm(A[M,K], B[K,N]): 2*M*N*K. addmm(C, A, B): same; the bias add is not counted (flop_counter).
    o = 1 if name.startswith(("addmm", "baddbmm")) else 0  # self (the bias) comes first
    (m, k), (_, n) = a.shape(o), a.shape(o + 1)
    return Cost.of(2 * m * n * k, sum(a.nbytes(i) for i in range(o + 2)), m * n * a.size(o), "gemm", a.dtype(o))


def bmm_cost(a: Args, name: str) -> Cost:
    # bmm(A[B,M,K], B[B,K,N]): 2*B*M*N*K; baddbmm(C, A, B): same, bias add not counted.
    o = 1 if name.startswith(("addmm", "baddbmm")) else 0  # self (the bias) comes first
    (b, m, k), (_, _, n) = a.shape(o), a.shape(o + 1)
    return Cost.of(2 * b * m * n * k, sum(a.nbytes(i) for i in range(o + 2)), b * m * n * a.size(o), "gemm", a.dtype(o))


def linear_cost(a: Args) -> Cost:
    # linear(X[..., K], W[N, K], b[N]?): 2 * prod(X[:-1]) * K * N; bias add not counted.
    x, w = a.shape(0), a.shape(1)
    rows, k, n = numel(x[:-1]), x[-1], w[0]
    return Cost.of(2 * rows * k * n, a.nbytes(0) + a.nbytes(1) + a.nbytes(2), rows * n * a.size(0), "gemm", a.dtype(0))


def matmul_cost(a: Args) -> Cost:
    # Resolved by ranks as torch.matmul does: 1-D operands get a unit dim (dot 2*K, mv 2*M*K),
    # batch dims broadcast; FLOPs = 2 * prod(batch) * M * K * N.
    x, y = a.shape(0), a.shape(1)
    xm = [1] + x if len(x) == 1 else x
    ym = y + [1] if len(y) == 1 else y
    if not x or not y or xm[-1] != ym[-2]:
        raise Unknown
    batch = broadcast(xm[:-2], ym[:-2])
    m, k, n = xm[-2], xm[-1], ym[-1]
    out = numel(batch) * m * n
    return Cost.of(2 * numel(batch) * m * k * n, a.nbytes(0) + a.nbytes(1), out * a.size(0), "gemm", a.dtype(0))


def scaled_mm_cost(a: Args) -> Cost:
    # _scaled_mm(A[M,K] fp8, B[K,N] fp8, scale_a, scale_b, bias?, scale_result?, out_dtype): 2*M*N*K.
    (m, k), (_, n) = a.shape(0), a.shape(1)
    out = SCALAR_TYPES.get(a.value(6, -1), a.dtypes[0])
    read = sum(a.nbytes(i) for i in range(6))
    return Cost.of(2 * m * n * k, read, m * n * DTYPES[out][1], "gemm", a.dtype(0))


def einsum_cost(a: Args) -> Cost:
    # einsum(equation, [A, B]) for two operands with an explicit '->' and no '...':
    # FLOPs = 2 * prod(size of every distinct index) (each output element sums over the
    # contracted indices). Kineto records the equation as '' in current torch: then None.
    eq = a.value(0)
    shapes = a.tensor_list(1)
    if not isinstance(eq, str) or "->" not in eq or "." in eq or len(shapes) != 2:
        raise Unknown
    ins, out = eq.replace(" ", "").split("->")
    terms = ins.split(",")
    sizes: dict[str, int] = {}
    for term, shape in zip(terms, shapes):
        if len(term) != len(shape):
            raise Unknown
        for c, s in zip(term, shape):
            sizes[c] = max(sizes.get(c, 1), s)
    es = a.list_size()
    out_n = numel([sizes[c] for c in out])
    return Cost.of(
        2 * numel(list(sizes.values())), sum(numel(s) for s in shapes) * es, out_n * es, "gemm", DTYPES[a.list_dtype][0]
    )


# ---------------------------------------------------------------------------- conv


def _conv_out(x_sp, k_sp, stride, padding, dilation, transposed, output_padding):
    n = len(x_sp)

    def per_dim(v, name):
        if isinstance(v, int):
            return [v] * n
        if isinstance(v, list) and len(v) in (1, n):
            return v * n if len(v) == 1 else v
        raise Unknown

    s, d = per_dim(stride, "stride"), per_dim(dilation, "dilation")
    if padding == "valid":
        padding = 0
    if padding == "same":  # stride 1 only: output spatial = input spatial
        return list(x_sp)
    p = per_dim(padding, "padding")
    if transposed:
        op = per_dim(output_padding, "output_padding")
        return [(i - 1) * s_ - 2 * p_ + d_ * (k - 1) + o + 1 for i, k, s_, p_, d_, o in zip(x_sp, k_sp, s, p, d, op)]
    # floor((in + 2*pad - dil*(k-1) - 1) / stride) + 1
    return [(i + 2 * p_ - d_ * (k - 1) - 1) // s_ + 1 for i, k, s_, p_, d_ in zip(x_sp, k_sp, s, p, d)]


# Positions of (bias, stride, padding, dilation, transposed, output_padding, groups) per op;
# None = not an argument of that op (bias absent, transposed False, output_padding 0).
CONV_ARGS = {
    "convolution": (2, 3, 4, 5, 6, 7, 8),
    "_convolution": (2, 3, 4, 5, 6, 7, 8),
    "conv1d": (2, 3, 4, 5, None, None, 6),
    "conv2d": (2, 3, 4, 5, None, None, 6),
    "conv3d": (2, 3, 4, 5, None, None, 6),
    "conv_transpose1d": (2, 3, 4, 7, True, 5, 6),
    "conv_transpose2d": (2, 3, 4, 7, True, 5, 6),
    "conv_transpose3d": (2, 3, 4, 7, True, 5, 6),
    "mkldnn_convolution": (2, 4, 3, 5, None, None, 6),
    "cudnn_convolution": (None, 3, 2, 4, None, None, 5),
}


def conv_flops(n: int, spatial: int, weight: list[int]) -> int:
    # 2 * N * prod(spatial) * prod(weight): each output position of each of the N images computes
    # C_out outputs of C_in/groups * prod(kernel) multiply-adds, and weight is
    # [C_out, C_in/groups, *kernel] (transposed: [C_in, C_out/groups, *kernel], spatial = the input's).
    return 2 * n * spatial * numel(weight)


def conv_cost(a: Args, name: str) -> Cost:
    # Forward (as flop_counter.conv_flop_count; bias not counted):
    #   FLOPs = 2 * N * C_out * prod(out spatial) * (C_in / groups) * prod(kernel)
    #   (weight is [C_out, C_in/groups, *kernel]); transposed: prod(in spatial) replaces out spatial
    #   and weight is [C_in, C_out/groups, *kernel]. Stride/padding/dilation must be recorded.
    bias, st, pad, dil, tr, opad, grp = CONV_ARGS[name]
    x, w = a.shape(0), a.shape(1)
    transposed = bool(a.value(tr)) if isinstance(tr, int) else bool(tr)
    groups = a.value(grp, 1)
    k_sp = w[2:]
    out_sp = _conv_out(
        x[2:], k_sp, a.value(st), a.value(pad), a.value(dil), transposed, a.value(opad, 0) if opad is not None else 0
    )
    if min(out_sp, default=1) < 0:
        raise Unknown  # inconsistent record: torch would have raised
    n = x[0]
    if transposed:
        flops = conv_flops(n, numel(x[2:]), w)
        c_out = w[1] * groups
    else:
        flops = conv_flops(n, numel(out_sp), w)
        c_out = w[0]
    read = a.nbytes(0) + a.nbytes(1) + (a.nbytes(bias) if bias is not None else 0)
    return Cost.of(flops, read, n * c_out * numel(out_sp) * a.size(0), "conv", a.dtype(0))


def conv_backward_cost(a: Args) -> Cost:
    # convolution_backward(grad_out, input, weight, bias_sizes, stride, padding, dilation,
    # transposed, output_padding, groups, output_mask), counted as flop_counter does:
    #   grad_input  (mask[0]): 2 * N * prod(grad_out spatial) * prod(weight)   [non-transposed]
    #                          2 * N * prod(input spatial) * prod(weight)      [transposed]
    #   grad_weight (mask[1]): 2 * N * C_in * C_out * prod(kernel) * prod(grad_out spatial)
    #                          (input spatial when transposed); note flop_counter uses the full
    #                          C_in here, so with groups it is `groups` times the forward count.
    #   grad_bias   (mask[2]): not counted.
    go, x, w = a.shape(0), a.shape(1), a.shape(2)
    transposed = bool(a.value(7))
    mask = a.value(10)
    if not isinstance(mask, list) or len(mask) != 3:
        raise Unknown
    n, c_in, c_out = x[0], x[1], go[1]
    sp = numel(x[2:]) if transposed else numel(go[2:])
    flops, read, written = 0, a.nbytes(0), 0
    if mask[0]:
        flops += 2 * n * sp * numel(w)
        read += a.nbytes(2)
        written += a.nbytes(1)
    if mask[1]:
        flops += 2 * n * c_in * c_out * numel(w[2:]) * sp
        read += a.nbytes(1)
        written += a.nbytes(2)
    if mask[2]:
        written += c_out * a.size(0)
    return Cost.of(flops, read, written, "conv", a.dtype(0))


# ---------------------------------------------------------------------------- attention

# name -> (index of the causal flag, layout, backward?, is the flag a mask type, writes lse?)
# layout 'bhld' = [B, H, L, D]; 'blhd' = [B, L, H, D] (the raw flash/efficient kernels).
ATTENTION_OPS = {
    "scaled_dot_product_attention": (5, "bhld", False, False, False),
    "_scaled_dot_product_flash_attention": (4, "bhld", False, False, True),
    "_scaled_dot_product_flash_attention_for_cpu": (4, "bhld", False, False, True),
    "_scaled_dot_product_efficient_attention": (6, "bhld", False, False, True),
    "_scaled_dot_product_cudnn_attention": (6, "bhld", False, False, True),
    "_flash_attention_forward": (8, "blhd", False, False, True),
    "_efficient_attention_forward": (9, "blhd", False, True, True),
    "_scaled_dot_product_flash_attention_backward": (11, "bhld", True, False, True),
    "_scaled_dot_product_flash_attention_for_cpu_backward": (7, "bhld", True, False, True),
    "_scaled_dot_product_efficient_attention_backward": (11, "bhld", True, False, True),
    "_scaled_dot_product_cudnn_attention_backward": (14, "bhld", True, False, True),
    "_flash_attention_backward": (11, "blhd", True, False, True),
    "_efficient_attention_backward": (14, "blhd", True, True, True),
}


def causal_pairs(lq: int, lk: int, bottom_right: bool = False) -> int:
    """(query, key) pairs a causal mask keeps.

    Top-left (torch's ``is_causal``: ``ones(Lq, Lk).tril()``): query i sees keys 0..i, so
    sum_i min(i+1, Lk) = L*(L+1)/2 when Lq = Lk = L. Bottom-right (``causal_lower_right``,
    mask type 2): query i sees keys 0..i+Lk-Lq.
    """
    shift = lk - lq if bottom_right else 0
    return sum(min(max(i + 1 + shift, 0), lk) for i in range(lq)) if lq < 4096 else pairs_closed(lq, lk, shift)


def pairs_closed(lq: int, lk: int, shift: int) -> int:
    # sum over i in [0, lq) of clamp(i + 1 + shift, 0, lk), in closed form.
    lo = max(0, -shift)  # first row with at least one key
    hi = min(lq, lk - shift)  # rows before this are not yet saturated
    total = 0
    if hi > lo:
        first, last = lo + 1 + shift, hi + shift  # arithmetic series of row lengths
        total += (first + last) * (hi - lo) // 2
    total += max(0, lq - max(hi, lo)) * lk
    return total


def attention_cost(a: Args, name: str) -> Cost:
    # Dense, as flop_counter (sdpa_flop_count / sdpa_backward_flop_count), per query head:
    #   forward  = 2*B*Hq*Lq*Lk*Dqk + 2*B*Hq*Lq*Lk*Dv           (= 4*B*Hq*Lq*Lk*D)
    #   backward = 2*B*Hq*Lq*Lk*(3*Dqk + 2*Dv)                  (five bmms; = 10*B*Hq*Lq*Lk*D)
    # Effective = dense * causal_pairs(Lq, Lk) / (Lq*Lk) when causal, else dense.
    # Bytes: read q, k, v (K/V at their own head count: GQA reads fewer), an attn mask/bias if
    # given; forward writes out [B,Hq,Lq,Dv] (+ logsumexp fp32 [B,Hq,Lq] for the kernel ops);
    # backward reads grad_out, q, k, v, out, logsumexp and writes dq, dk, dv.
    flag, layout, backward, mask_type, lse = ATTENTION_OPS[name]
    o = 1 if backward else 0
    q, k, v = a.shape(o), a.shape(o + 1), a.shape(o + 2)
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        raise Unknown  # nested / varlen layouts: lengths are data
    if layout == "blhd":
        q, k, v = ([s[0], s[2], s[1], s[3]] for s in (q, k, v))
    b, hq, lq, dqk = q
    lk, dv = k[2], v[3]
    pairs = b * hq * lq * lk
    dense = 2 * pairs * (3 * dqk + 2 * dv) if backward else 2 * pairs * (dqk + dv)
    f = a.value(flag, False)
    if mask_type:
        causal, bottom_right = f in (1, 2), f == 2
    else:
        causal, bottom_right = bool(f), False
    eff = dense * causal_pairs(lq, lk, bottom_right) / (lq * lk) if causal and lq * lk else dense
    es = a.size(o)
    lse_bytes = b * hq * lq * 4 if lse else 0
    if backward:  # grad_out, q, k, v; out (grad_out-sized); lse
        read = sum(a.nbytes(i) for i in range(4)) + a.nbytes(0) + lse_bytes
        written = a.nbytes(1) + a.nbytes(2) + a.nbytes(3)
    else:
        read = sum(a.nbytes(i) for i in a.tensors())
        written = b * hq * lq * dv * es + lse_bytes
    return Cost.of(dense, read, written, "attention", a.dtype(o), effective=eff)
