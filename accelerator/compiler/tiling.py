"""Tiling: a tile size for every kernel from the core's local memory, with double buffering (the
DMA loads tile i+1 while the core computes tile i, so each streamed operand is held twice).
Sizes come from the example input (`TensorType.hint`) for dynamic dims.

Matmul kernels (mm, addmm, bmm, qmm, convolution as an implicit GEMM: M = N*Ho*Wo, N = Cout,
K = Cin/groups*kh*kw), tile {m, n, k}, bytes a, b (operands), acc (accumulator), out (result):

    local(tm, tn, tk) = 2*(tm*tk*a + tk*tn*b) + tm*tn*acc + 2*tm*tn*out
                        + sum over the kernel's other operands e (bias, residual, norm weight)
                          of 2*min(numel(e), tm*max(tn, tk))*bytes(e)

  Heuristic: tm and tk multiples of the array's rows R, tn of its columns C, each a power-of-two
  multiple of R (C) or the dimension rounded up to R (C), or the dimension itself when it is no
  larger than R (C): 8 decode rows are not padded to 128 in memory; maximise tm*tn (output reuse: each A
  tile is read N/tn times, each B tile M/tm times), then tk (fewer accumulation steps), then the
  wider tn, subject to local(tm, tn, tk) <= local memory capacity. A matmul legalised onto the
  vector unit (fp32 on the edge NPU) is tiled the same way.

Vector and DMA kernels, tile {elements}, streams s = the kernel's tensor inputs and outputs:

    local(n) = 2 * n * sum_s bytes(s);  n = capacity / (2 * sum_s bytes(s)), rounded down to a
    multiple of the vector lanes (of a row's length when the kernel reduces rows), at most the
    largest value's element count (a value smaller than the lanes is one partial tile).

Attention kernels, tile {q, kv} per (batch, head), E/Ev head dims, a operand bytes:

    ws(bq, bk) = 2*(bq*E + bk*E + bk*Ev)*a + 2*bq*bk*mask + bq*bk*4 (fp32 scores)
                 + bq*Ev*4 (fp32 output accumulator) + 2*bq*4 (running max and sum)

  Whole (bq = Lq, bk = Lk) when ws fits local memory, else shared memory; else flash-style:
  bq, bk powers of two (or the whole length) maximising bq*bk (then bk) with ws <= local capacity. A tile smaller
  than the whole is a flash schedule (online softmax over kv blocks).

Overrides (`ctx.tiles` and the plan file's `tiles`, by kernel name) replace the choice; one that
does not fit raises InputError naming the kernel, the tile and its bytes against the capacity.
Host kernels have no tile."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from accelerator.compiler.instances import instances
from accelerator.compiler.legalize import op_kind
from accelerator.compiler.pipeline import CompileContext
from accelerator.compiler.program import Kernel, Op, Program, Ref, TensorType, tensor_types
from accelerator.hardware import AccelSpec
from profiler.model.errors import InputError

ITEMSIZE = {
    "float64": 8,
    "float32": 4,
    "int32": 4,
    "int64": 8,
    "bfloat16": 2,
    "float16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
}
TILED_MATMULS = {"mm", "addmm", "bmm", "npu.qmm"}  # the functional mode runs these tile by tile


_TYPES: dict[int, tuple[Program, dict[str, Any]]] = {}


def _types(program: Program) -> dict[str, Any]:
    """program.types(), computed once per program (every kernel asks; programs are frozen)."""
    hit = _TYPES.get(id(program))
    if hit is None or hit[0] is not program:
        _TYPES.clear()  # only the program being tiled is kept
        hit = _TYPES[id(program)] = (program, program.types())
    return hit[1]


def _t(types: Mapping[str, Any], v: Any) -> TensorType | None:
    t = types.get(v.name) if isinstance(v, Ref) else None
    return t if isinstance(t, TensorType) else None


def _bytes(t: TensorType | None) -> int:
    return ITEMSIZE.get(t.dtype, 4) if t else 4


def _candidates(dim: int, unit: int) -> list[int]:
    """Power-of-two multiples of `unit` below `dim` rounded up to `unit`, and that rounded dim;
    just `dim` when it is no larger than `unit` (a short dimension is not padded in memory)."""
    if dim <= unit:
        return [max(dim, 1)]
    top = -(-dim // unit) * unit
    out, c = {top}, unit
    while c < top:
        out.add(c)
        c *= 2
    return sorted(out)


def matmul_dims(program: Program, op: Op) -> dict[str, int]:
    """M, N, K, batch and the byte widths (a, b, acc, out) of a matmul-class op."""
    types = _types(program)
    out = next(tensor_types(op.type))
    k = op_kind(op.target)
    if k == "convolution":
        x, w = _t(types, op.args[0]), _t(types, op.args[1])
        n, co, *spatial = out.hint
        m = n
        for s in spatial:
            m *= s
        kk = 1
        for s in w.hint[1:] if w else ():
            kk *= s
        dims = {"batch": 1, "m": m, "n": co, "k": kk}
        a, b = x, w
    else:
        a, b = (op.args[1], op.args[2]) if k == "addmm" else (op.args[0], op.args[1])
        a, b = _t(types, a), _t(types, b)
        ah, bh = (a.hint if a else (1, 1)), (b.hint if b else (1, 1))
        batch = 1
        for s in ah[:-2]:
            batch *= s
        dims = {"batch": batch, "m": ah[-2], "n": bh[-1], "k": ah[-1]}
    acc = op.attrs.get("accumulate")
    dims.update(a=_bytes(a), b=_bytes(b), out=_bytes(out), acc=ITEMSIZE.get(str(acc), max(4, _bytes(out))))
    return dims


def attention_dims(program: Program, op: Op) -> dict[str, int]:
    """Lq, Lk, E, Ev, operand bytes and mask bytes (0 without a mask) of an SDPA op."""
    types = _types(program)
    q, k, v = (_t(types, a) for a in op.args[:3])
    mask = _t(types, op.args[3]) if len(op.args) > 3 else _t(types, op.kwargs.get("attn_mask"))
    qh, kh, vh = (t.hint if t else (1, 1) for t in (q, k, v))
    return {
        "lq": qh[-2],
        "lk": kh[-2],
        "e": qh[-1],
        "ev": vh[-1],
        "a": _bytes(q),
        "mask": _bytes(mask) if mask else 0,
        "causal": int(bool(op.args[5] if len(op.args) > 5 else op.kwargs.get("is_causal", False))),
    }


def attention_bytes(d: Mapping[str, int], bq: int, bk: int) -> int:
    return (
        2 * (bq * d["e"] + bk * d["e"] + bk * d["ev"]) * d["a"]
        + 2 * bq * bk * d["mask"]
        + bq * bk * 4
        + bq * d["ev"] * 4
        + 2 * bq * 4
    )


def attention_decision(program: Program, op: Op, hw: AccelSpec) -> dict[str, Any]:
    """Whether attention runs whole on-chip (local or shared memory) or flash-style, with why."""
    d = attention_dims(program, op)
    ws = attention_bytes(d, d["lq"], d["lk"])
    local, shared = hw.local_memory.capacity_bytes, hw.shared_memory.capacity_bytes
    head = f"q {d['lq']}x{d['e']}, k/v {d['lk']}x{d['e']}/{d['ev']}, scores {d['lq']}x{d['lk']} fp32"
    if ws <= local:
        return {
            "attention": "whole",
            "memory": "local",
            "working_set_bytes": ws,
            "why": f"{head}: {ws} B <= local {local} B",
        }
    if ws <= shared:
        return {
            "attention": "whole",
            "memory": "shared",
            "working_set_bytes": ws,
            "why": f"{head}: {ws} B > local {local} B, <= shared {shared} B",
        }
    return {
        "attention": "flash",
        "memory": "local",
        "working_set_bytes": ws,
        "why": f"{head}: {ws} B > shared {shared} B: tiled over q and kv blocks",
    }


def _matmul_bytes(d: Mapping[str, int], tile: Mapping[str, int], extra: list[tuple[int, int]]) -> int:
    tm, tn, tk = tile["m"], tile["n"], tile["k"]
    core = 2 * (tm * tk * d["a"] + tk * tn * d["b"]) + tm * tn * d["acc"] + 2 * tm * tn * d["out"]
    return core + sum(2 * min(numel, tm * max(tn, tk)) * size for numel, size in extra)


def _streams(program: Program, kernel: Kernel, skip: set[str], outputs: bool = True) -> list[tuple[int, int]]:
    """(elements, bytes per element) of the kernel's tensor inputs (except `skip`) and outputs."""
    types = _types(program)
    names = [n for n in kernel.inputs if n not in skip] + (list(kernel.outputs or kernel.ops[-1:]) if outputs else [])
    out = []
    for n in names:
        t = types.get(n)
        if isinstance(t, TensorType) and t.dtype in ITEMSIZE and t.hint:
            out.append((t.numel, ITEMSIZE[t.dtype]))
    return out


class _Tiler:
    """Tile shapes and their local bytes for the kinds of kernel."""

    def __init__(self, program: Program, hw: AccelSpec):
        self.program, self.hw = program, hw
        self.ops = {o.name: o for o in program.ops}
        self.local = hw.local_memory.capacity_bytes

    def anchor(self, kernel: Kernel) -> tuple[str, Op | None]:
        from accelerator.compiler.fusion import kind

        for o in kernel.ops:
            k = kind(self.ops[o])
            if k in ("matmul", "attention"):
                return k, self.ops[o]
        return kernel.unit, None

    def capacity(self, kernel: Kernel) -> tuple[int, str]:
        if kernel.attrs.get("attention") == "whole" and kernel.attrs.get("memory") == "shared":
            return self.hw.shared_memory.capacity_bytes, "shared memory"
        return self.local, "local memory"

    def local_bytes(self, kernel: Kernel, tile: Mapping[str, int]) -> int:
        k, op = self.anchor(kernel)
        if k == "matmul" and op is not None:
            d = self._dims(kernel, op)
            return _matmul_bytes(d, tile, self._extra(kernel, op))
        if k == "attention" and op is not None:
            return attention_bytes(attention_dims(self.program, op), tile["q"], tile["kv"])
        return 2 * tile["elements"] * sum(size for _, size in _streams(self.program, kernel, set()))

    def dims(self, kernel: Kernel) -> tuple[str, ...]:
        k, _ = self.anchor(kernel)
        return {"matmul": ("m", "n", "k"), "attention": ("q", "kv")}.get(k, ("elements",))

    def _root(self, kernel: Kernel, name: str) -> str:
        """The value outside the kernel a matmul operand is loaded from (through in-kernel
        views, casts and a weight's layout op: the DMA reads it and converts on the way)."""
        from accelerator.compiler.fusion import kind

        while name in kernel.ops and kind(self.ops[name]) in ("view", "cast", "layout"):
            refs = self.ops[name].refs()
            if not refs:
                break
            name = refs[0]
        return name

    def _operands(self, kernel: Kernel, op: Op) -> list[str]:
        k = op_kind(op.target)
        args = op.args[1:3] if k == "addmm" else op.args[:2]
        return [self._root(kernel, a.name) for a in args if isinstance(a, Ref)]

    def _dims(self, kernel: Kernel, op: Op) -> dict[str, int]:
        """matmul_dims with a and b at least as wide as the values the operands are loaded from,
        out the width of the value the kernel stores."""
        d = matmul_dims(self.program, op)
        types = _types(self.program)
        last = next(tensor_types(self.ops[kernel.ops[-1]].type))
        d["out"] = _bytes(last)  # the kernel stores its last op's value, not the accumulator
        roots = self._operands(kernel, op)
        for key, root in zip(("a", "b"), roots):
            t = types.get(root)
            if isinstance(t, TensorType):
                d[key] = max(d[key], _bytes(t))
        return d

    def _extra(self, kernel: Kernel, op: Op) -> list[tuple[int, int]]:
        # every input but the two operands' (counted as a and b): bias, residual, norm weight
        return _streams(self.program, kernel, set(self._operands(kernel, op)), outputs=False)

    def choose(self, kernel: Kernel) -> dict[str, int]:
        k, op = self.anchor(kernel)
        rows, cols = self.hw.matrix.rows, self.hw.matrix.cols
        if k == "matmul" and op is not None:
            d = self._dims(kernel, op)
            extra = self._extra(kernel, op)
            best: tuple[int, int, int, int] | None = None
            for tm in _candidates(d["m"], rows):
                for tn in _candidates(d["n"], cols):
                    for tk in _candidates(d["k"], rows):
                        t = {"m": tm, "n": tn, "k": tk}
                        if _matmul_bytes(d, t, extra) <= self.local:
                            key = (tm * tn, tk, -tm, tn)
                            if best is None or key > best:
                                best = key
            if best is None:  # the smallest; tile_kernels reports that it does not fit
                return {
                    "m": _candidates(d["m"], rows)[0],
                    "n": _candidates(d["n"], cols)[0],
                    "k": _candidates(d["k"], rows)[0],
                }
            return {"m": -best[2], "n": best[3], "k": best[1]}
        if k == "attention" and op is not None:
            d = attention_dims(self.program, op)
            if kernel.attrs.get("attention") != "flash":
                return {"q": d["lq"], "kv": d["lk"]}
            fits = [
                (bq * bk, bk, bq)
                for bq in _candidates(d["lq"], 1)
                for bk in _candidates(d["lk"], 1)
                if attention_bytes(d, bq, bk) <= self.local
            ]
            _, bk, bq = max(fits, default=(0, 1, 1))  # nothing fits: check() says so
            return {"q": bq, "kv": bk}
        streams = _streams(self.program, kernel, set())
        per = 2 * sum(size for _, size in streams) or 1
        most = max((n for n, _ in streams), default=1)
        unit = self.hw.vector.lanes
        row = self._row(kernel)
        if row:
            unit = row  # a reduction needs whole rows
        n = max(unit, (self.local // per) // unit * unit)
        return {"elements": min(n, most)}

    def _row(self, kernel: Kernel) -> int:
        """Length of the rows a reduction in the kernel reduces (0 without one)."""
        from accelerator.compiler.fusion import kind

        types = _types(self.program)
        for o in kernel.ops:
            op = self.ops[o]
            if kind(op) == "reduction":
                t = _t(types, op.args[0]) if op.args else None
                return t.hint[-1] if t and t.hint else 0
        return 0


def _fmt(tile: Mapping[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in tile.items())


def tile_kernels(program: Program, ctx: CompileContext) -> Program:
    """The tiling pass: kernel.tile and attrs['local_bytes'] for every non-host kernel (the
    heuristic in the module docstring, or the override), attrs['attention'] = 'flash' when an
    attention tile is smaller than the whole; the tile is printed on the kernel's ops (MLIR)."""
    from accelerator.compiler.fusion import FusionPlan

    tiler = _Tiler(program, ctx.hardware)
    plan = ctx.plan if isinstance(ctx.plan, FusionPlan) else None
    sources = {name: plan.source for name in (plan.tiles if plan else {})}
    overrides = {**(plan.tiles if plan else {}), **ctx.tiles}
    names = {k.name for k in program.kernels}
    unknown = next((n for n in overrides if n not in names), None)
    if unknown:
        shown = ", ".join(sorted(names)[:8]) + (", ..." if len(names) > 8 else "")
        raise InputError(
            sources.get(unknown), f"tile override names kernel {unknown!r}, which the program does not have ({shown})"
        )
    kernels = []
    inst = instances(program) if ctx.reuse_blocks and ctx.replay_blocks else None
    types = _types(program) if inst else {}
    first: dict[tuple[str, ...], tuple[tuple, Kernel]] = {}  # instance 0's kernels by their ops
    replayed = 0

    def signature(k: Kernel) -> tuple:
        """What the tile depends on besides the ops: unit, the on-chip decision, the streams' types."""
        return (
            k.unit,
            k.attrs.get("attention"),
            k.attrs.get("memory"),
            [types.get(n) for n in (*k.inputs, *k.outputs)],
        )

    for k in program.kernels:
        if k.unit == "host":
            kernels.append(k)
            continue
        given = overrides.get(k.name)
        where = {inst.of.get(o) for o in k.ops} if inst else set()
        if inst and given is None and len(where) == 1 and (i := where.pop()) is not None:
            if i == 0:
                first[k.ops] = (signature(k), k)  # tiled below; the tiled kernel replaces it
            else:
                seen = first.get(tuple(inst.back[o] for o in k.ops))
                if seen is not None and seen[0] == signature(k):
                    done = seen[1]
                    attrs = {
                        **k.attrs,
                        **{a: done.attrs[a] for a in ("attention", "local_bytes", "memory") if a in done.attrs},
                    }
                    kernels.append(replace(k, tile=dict(done.tile or {}), attrs=attrs))
                    replayed += 1
                    continue
        dims = tiler.dims(k)
        if given is not None:
            if set(given) != set(dims) or not all(
                isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in given.values()
            ):
                raise InputError(
                    sources.get(k.name),
                    f"kernel {k.name}: tile {dict(given)} must give positive integers for {', '.join(dims)}",
                )
            tile = {d: int(given[d]) for d in dims}
        else:
            tile = tiler.choose(k)
        attrs = dict(k.attrs)
        if "q" in tile:
            d = attention_dims(program, tiler.anchor(k)[1])  # type: ignore[arg-type]
            whole = tile["q"] >= d["lq"] and tile["kv"] >= d["lk"]
            if not whole:
                attrs["attention"] = "flash"
        used = tiler.local_bytes(replace(k, attrs=attrs), tile)
        cap, level = tiler.capacity(replace(k, attrs=attrs))
        if used > cap:
            raise InputError(
                sources.get(k.name),
                f"kernel {k.name}: tile {_fmt(tile)} needs {used} B of {level}, "
                f"over the {cap} B of {ctx.hardware.name}",
            )
        attrs.update(local_bytes=used, memory=attrs.get("memory", "local"))
        ctx.decide(k.name, f"tile {_fmt(tile)}", f"{used} B of {cap} B {level}" + (" (override)" if given else ""))
        kernels.append(replace(k, tile=tile, attrs=attrs))
        if k.ops in first:
            first[k.ops] = (first[k.ops][0], kernels[-1])
    if replayed:
        ctx.decide(
            inst.span(),  # type: ignore[union-attr]
            f"as {inst.path}.0: {replayed} kernels' tiles",  # type: ignore[union-attr]
            "identical blocks: the first instance's tiles (same ops, unit and stream types)",
        )
    tiled = {(tiler.anchor(k)[1] or tiler.ops[k.ops[0]]).name: _fmt(k.tile) for k in kernels if k.tile}
    ops = [replace(o, attrs={**o.attrs, "tile": tiled[o.name]}) if o.name in tiled else o for o in program.ops]
    return program.with_ops(ops, kernels=tuple(kernels))


def fitting_tiles(program: Program, kernel: Kernel, hw: AccelSpec) -> list[dict[str, int]]:
    """Every tile of a matmul or attention kernel that fits its memory with double buffering
    (the local-bytes formulas of the module docstring against the capacity the pass uses), in
    the pass's order of preference: matmul by (tm*tn, tk, -tm, tn), so the first is the pass's
    own choice; attention by (bq*bk, bk). [] for a vector, DMA or host kernel. The autotune
    space (profiler/autotune/build.py) offers these as a kernel's tile options."""
    tiler = _Tiler(program, hw)
    k, op = tiler.anchor(kernel)
    if op is None:
        return []
    if k == "matmul":
        d = tiler._dims(kernel, op)
        rows, cols = hw.matrix.rows, hw.matrix.cols
        grid = [
            {"m": m, "n": n, "k": kk}
            for m in _candidates(d["m"], rows)
            for n in _candidates(d["n"], cols)
            for kk in _candidates(d["k"], rows)
        ]
        order = sorted(grid, key=lambda t: (t["m"] * t["n"], t["k"], -t["m"], t["n"]), reverse=True)
    else:
        a = attention_dims(program, op)
        grid = [{"q": q, "kv": kv} for q in _candidates(a["lq"], 1) for kv in _candidates(a["lk"], 1)]
        order = sorted(grid, key=lambda t: (t["q"] * t["kv"], t["kv"]), reverse=True)
    cap, _ = tiler.capacity(kernel)
    return [t for t in order if tiler.local_bytes(kernel, t) <= cap]
