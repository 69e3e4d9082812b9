"""The program every compiler pass reads and returns: a straight-line list of ops over named
values, each op carrying where it came from (module path, file:line) and what the passes decided
about it (`attrs`: unit, compute dtype, ...). Frozen: a pass returns a new program.

Values are named by strings: a program input (`Input.name`) or an op's result (`Op.name`). An
op's `args`/`kwargs` hold `Ref(name)` where a value is used and plain Python constants (ints,
floats, dtypes, lists) elsewhere, as torch.export's graph holds them.

Targets: ATen ops by their overload name (`aten.mm.default`), torch's quantize/dequantize ops
(`quantized_decomposed.quantize_per_tensor.default`), `getitem` (one result of a tuple), and the
compiler's own ops (`npu.cast`, `npu.quantize`, `npu.dequantize`, `npu.qmm`; accelerator/compiler/npu_ops.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class TensorType:
    """`shape`: ints, or a str for a dynamic dim (`s0`); `hint`: the shape at the example input.
    `dtype`: torch's name (float32, bfloat16, int8, int64, bool, float8_e4m3fn), `symint` for a
    size computed at run time (shape ())."""

    shape: tuple[int | str, ...]
    dtype: str
    hint: tuple[int, ...]

    @property
    def numel(self) -> int:
        n = 1
        for d in self.hint:
            n *= d
        return n

    def with_dtype(self, dtype: str) -> TensorType:
        return replace(self, dtype=dtype)


@dataclass(frozen=True)
class Ref:
    """A use of the value named `name`."""

    name: str


@dataclass(frozen=True)
class Input:
    """`kind`: user (an argument of forward), param, buffer or constant; `target`: the state-dict key."""

    name: str
    kind: str
    target: str
    type: TensorType


@dataclass(frozen=True)
class Op:
    name: str
    target: str
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]
    type: TensorType | tuple[TensorType, ...]
    module: str = ""  # nn.Module path ("layers.0.attn.q_proj"), "" at the top
    source: str = ""  # "file.py:76", the innermost frame of the model's own code
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def refs(self) -> list[str]:
        """Names of the values this op reads, in argument order."""
        out: list[str] = []
        _walk(self.args, out)
        _walk(tuple(self.kwargs.values()), out)
        return out

    def where(self) -> str:
        """`module (file:line)` for messages."""
        return f"{self.module or '<top>'} ({self.source or 'unknown source'})"


@dataclass(frozen=True)
class Output:
    """A result of the program: `name` the value, `kind` user (returned by forward) or buffer
    (a buffer's new value, written back to `target` after the call)."""

    name: str
    kind: str = "user"
    target: str = ""


@dataclass(frozen=True)
class Kernel:
    """One launch on the accelerator: the program ops it runs (`ops`, names in program order),
    the unit that runs it (matrix, vector, dma, host), the values it reads from outside itself
    (`inputs`) and the values it produces that others read or the program returns (`outputs`).
    `tile`: tile size per loop dimension (e.g. {"m": 128, "n": 128, "k": 512}), None until
    the tiling pass; `attrs`: what passes decided (why fused, local bytes of a tile, ...)."""

    name: str
    ops: tuple[str, ...]
    unit: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    tile: Mapping[str, int] | None = None
    attrs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Placement:
    """Where a buffer lives: `level` (local, shared, hbm, host), byte `offset` and `size` in
    that level (per chip), and the kernels it is live over, [first, last] by kernel index."""

    level: str
    offset: int
    size: int
    live: tuple[int, int]


@dataclass(frozen=True)
class Transfer:
    """A DMA transfer the schedule issues: `value` moved from `src` to `dst` level, `bytes`,
    before kernel `before` (its index in the schedule; loads) or after it (stores: `after`)."""

    value: str
    src: str
    dst: str
    bytes: int
    before: int = -1
    after: int = -1


@dataclass(frozen=True)
class Program:
    """`state`: the tensor of every param/buffer/constant input, by input name. `example_inputs`:
    the user inputs the program was captured with. `exported`: the torch.export ExportedProgram it
    came from (decomposition reads it), None once ops no longer correspond to it."""

    name: str
    inputs: tuple[Input, ...]
    ops: tuple[Op, ...]
    outputs: tuple[Output, ...]
    state: Mapping[str, Any]
    example_inputs: tuple[Any, ...] = ()
    exported: Any = None
    kernels: tuple[Kernel, ...] = ()  # empty until fusion groups ops (default_kernels: one per op)
    placement: Mapping[str, Placement] = field(default_factory=dict)  # value -> where it lives (allocation)
    transfers: tuple[Transfer, ...] = ()  # the DMA transfers the schedule issues (scheduling)
    repeat: Any = None  # blocks.Repeat: `exported` holds 2 of its identical blocks, the ops all of them
    chips: int = 1  # chips the program runs on, one copy per chip (partition.py); types are per chip
    shards: Mapping[str, int] = field(default_factory=dict)  # input -> dim its state tensor is split along
    # input -> chips holding each slice of it (absent: 1): KV heads fewer than chips, split into
    # chips / r slices, chip c holding slice c // r (partition.py)
    replicas: Mapping[str, int] = field(default_factory=dict)

    def types(self) -> dict[str, TensorType | tuple[TensorType, ...]]:
        """The type of every value by name."""
        out: dict[str, Any] = {i.name: i.type for i in self.inputs}
        out.update((o.name, o.type) for o in self.ops)
        return out

    def producers(self) -> dict[str, Op]:
        return {o.name: o for o in self.ops}

    def users(self) -> dict[str, list[Op]]:
        out: dict[str, list[Op]] = {}
        for o in self.ops:
            for r in o.refs():
                out.setdefault(r, []).append(o)
        return out

    def op_counts(self) -> Counter[str]:
        """Ops by target."""
        return Counter(o.target for o in self.ops)

    def with_ops(self, ops: list[Op] | tuple[Op, ...], **changes: Any) -> Program:
        return replace(self, ops=tuple(ops), **changes)


def _walk(value: Any, out: list[str]) -> None:
    if isinstance(value, Ref):
        out.append(value.name)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _walk(v, out)


def map_refs(value: Any, fn: Callable[[Ref], Any]) -> Any:
    """`value` with every Ref replaced by fn(ref), lists and tuples rebuilt."""
    if isinstance(value, Ref):
        return fn(value)
    if isinstance(value, list):
        return [map_refs(v, fn) for v in value]
    if isinstance(value, tuple):
        return tuple(map_refs(v, fn) for v in value)
    return value


def rename_uses(ops: list[Op], renames: Mapping[str, str]) -> list[Op]:
    """`ops` with every use of a value in `renames` pointing at its new name."""
    if not renames:
        return list(ops)

    def fn(r: Ref) -> Ref:
        return Ref(renames.get(r.name, r.name))

    return [
        replace(o, args=map_refs(o.args, fn), kwargs={k: map_refs(v, fn) for k, v in o.kwargs.items()}) for o in ops
    ]


def tensor_types(t: TensorType | tuple[TensorType, ...]) -> Iterator[TensorType]:
    yield from (t if isinstance(t, tuple) else (t,))


def prune(program: Program) -> Program:
    """`program` without ops nobody reads (in-place ops and outputs are read) and without the
    param/constant inputs no op reads any more (their tensors leave `state` too)."""
    live = {o.name for o in program.outputs}
    kept: list[Op] = []
    for op in reversed(program.ops):
        if op.name in live or "in_place" in op.attrs or op.target.endswith("_.default"):
            kept.append(op)
            live.update(op.refs())
    inputs = tuple(i for i in program.inputs if i.kind in ("user", "buffer") or i.name in live)
    names = {i.name for i in inputs}
    state = {k: v for k, v in program.state.items() if k in names}
    return replace(program, ops=tuple(reversed(kept)), inputs=inputs, state=state)


def default_kernels(program: Program) -> tuple[Kernel, ...]:
    """One kernel per op a unit runs (attrs['unit'] set by legalisation; ops without a unit,
    such as getitem, belong to their producer's kernel): what the program runs before fusion."""
    users = program.users()
    outputs = {o.name for o in program.outputs}
    kernels: list[Kernel] = []
    for op in program.ops:
        unit = op.attrs.get("unit")
        if unit is None and kernels and any(r in kernels[-1].outputs for r in op.refs()):
            k = kernels[-1]
            kernels[-1] = replace(k, ops=(*k.ops, op.name), outputs=(*k.outputs, op.name))
            continue
        read_outside = op.name in outputs or bool(users.get(op.name))
        kernels.append(
            Kernel(
                name=f"k{len(kernels)}_{op.name}",
                ops=(op.name,),
                unit=str(unit or "host"),
                inputs=tuple(dict.fromkeys(op.refs())),
                outputs=(op.name,) if read_outside else (),
            )
        )
    return tuple(kernels)
