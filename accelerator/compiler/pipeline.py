"""The pass pipeline: capture, then program -> program passes in a fixed order, each one
skippable or replaceable by the caller, each recorded in the compile log (`PassLog`: wall time,
op counts before and after, the decisions it took and why).

A pass is a plain function `pass_fn(program, ctx) -> program`; `ctx` (`CompileContext`) carries
the hardware, the precision policy and the `decide` callback a pass records decisions through.
Capture is the one stage that starts from the model: `capture_fn(model, example_inputs, ctx)`."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelerator.compiler.program import Program
from accelerator.hardware import AccelSpec


@dataclass(frozen=True)
class Decision:
    """One choice a pass made: `op` the op (or "" for the program), `what` it decided, `why`."""

    op: str
    what: str
    why: str


@dataclass(frozen=True)
class PassLog:
    """One pass's record: `wall_ns` its wall time (time.perf_counter_ns), `ops_before`/`ops_after`
    the op count of the program it read and of the one it returned (0 before capture),
    `kernels_before`/`kernels_after` its kernel count likewise (0 before fusion)."""

    name: str
    wall_ns: int
    ops_before: int
    ops_after: int
    decisions: tuple[Decision, ...]
    skipped: bool = False
    kernels_before: int = 0  # len(program.kernels): 0 until fusion groups the ops
    kernels_after: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "wall_ns": self.wall_ns,
            "ops_before": self.ops_before,
            "ops_after": self.ops_after,
            "kernels_before": self.kernels_before,
            "kernels_after": self.kernels_after,
            "skipped": self.skipped,
            "decisions": [{"op": d.op, "what": d.what, "why": d.why} for d in self.decisions],
        }


@dataclass
class CompileContext:
    """What every pass may read. `precision`: the policy name (accelerator/compiler/precision.py);
    `precision_overrides`: module-path prefix -> policy (the longest prefix wins);
    `host_fallback`: an op no unit runs goes to the host partition (True) or stops the compile;
    `dynamic`: capture with a dynamic sequence/batch dimension where the model allows;
    `plan`: the fusion plan (accelerator/compiler/fusion.py) and `tiles` the tile overrides by
    kernel name (accelerator/compiler/tiling.py);
    `reuse_blocks`: identical blocks traced and decomposed once (accelerator/compiler/blocks.py);
    `replay_blocks`: with them, fusion and tiling decide for the first instance and replay the
    decision on the others (accelerator/compiler/instances.py);
    `chips`: chips the program is partitioned over (accelerator/compiler/partition.py)."""

    hardware: AccelSpec
    precision: str = "fp32"
    precision_overrides: Mapping[str, str] = field(default_factory=dict)
    host_fallback: bool = True
    dynamic: bool = True
    reuse_blocks: bool = True
    replay_blocks: bool = True
    chips: int = 1
    decisions: list[Decision] = field(default_factory=list)
    plan: Any = None  # a fusion.FusionPlan (a plan file's groups and tiles); None: the automatic plan
    tiles: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # kernel name -> tile override

    def policy(self, module: str) -> str:
        """The precision policy of an op in `module`: the override of the longest module-path
        prefix that matches it, else `precision`."""
        best = ""
        for prefix in self.precision_overrides:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
                best = prefix
        return self.precision_overrides[best] if best else self.precision

    def decide(self, op: str, what: str, why: str) -> None:
        self.decisions.append(Decision(op, what, why))


PassFn = Callable[[Program, CompileContext], Program]
CaptureFn = Callable[[Any, tuple, CompileContext], Program]


@dataclass(frozen=True)
class Compiled:
    program: Program
    log: tuple[PassLog, ...]
    programs: Mapping[str, Program]  # the program after each pass, by pass name


def default_passes() -> list[tuple[str, PassFn]]:
    """The passes after capture, in order."""
    from accelerator.compiler.allocate import allocate
    from accelerator.compiler.decompose import decompose
    from accelerator.compiler.fusion import fuse
    from accelerator.compiler.legalize import legalize
    from accelerator.compiler.partition import partition
    from accelerator.compiler.precision import assign_precision
    from accelerator.compiler.schedule import schedule
    from accelerator.compiler.tiling import tile_kernels

    return [
        ("decompose", decompose),
        ("precision", assign_precision),
        ("legalize", legalize),
        ("partition", partition),  # right after legalize: fusion, tiling, allocation are per chip
        ("fusion", fuse),
        ("tiling", tile_kernels),
        ("allocate", allocate),  # last passes: they place and order whatever kernels fusion/tiling made
        ("schedule", schedule),
    ]


class Pipeline:
    """`Pipeline(skip={"decompose"}, override={"precision": my_fn}).run(model, inputs, ctx)`.

    Skipping capture is not possible (nothing else turns a model into a program); every other
    pass may be skipped (the log keeps a `skipped` row) or replaced by a function of the same
    signature. Unknown names in `skip`/`override` raise ValueError (a typo must not pass silently)."""

    def __init__(
        self,
        passes: Sequence[tuple[str, PassFn]] | None = None,
        *,
        capture: CaptureFn | None = None,
        skip: Sequence[str] = (),
        override: Mapping[str, PassFn] | None = None,
    ):
        from accelerator.compiler.capture import capture as default_capture

        self.passes = list(passes if passes is not None else default_passes())
        self.capture = capture or default_capture
        names = {n for n, _ in self.passes}
        override = dict(override or {})
        unknown = (set(skip) | set(override)) - names
        if unknown:
            raise ValueError(
                f"no pass named {', '.join(sorted(unknown))}; passes: {', '.join(n for n, _ in self.passes)}"
            )
        self.skip = set(skip)
        self.override = override

    def names(self) -> list[str]:
        return ["capture"] + [n for n, _ in self.passes]

    def run(self, model: Any, example_inputs: tuple, ctx: CompileContext) -> Compiled:
        """Capture `model` on `example_inputs`, then every pass."""
        ctx.decisions = []
        t0 = time.perf_counter_ns()
        program = self.capture(model, example_inputs, ctx)
        captured = PassLog("capture", time.perf_counter_ns() - t0, 0, len(program.ops), tuple(ctx.decisions))
        return self.run_program(program, ctx, [captured], {"capture": program})

    def run_program(
        self,
        program: Program,
        ctx: CompileContext,
        log: list[PassLog] | None = None,
        programs: dict[str, Program] | None = None,
    ) -> Compiled:
        """Every pass over an already captured `program` (the log then has no capture row)."""
        log = list(log or [])
        programs = dict(programs or {})
        for name, fn in self.passes:
            before, kernels = len(program.ops), len(program.kernels)
            if name in self.skip:
                log.append(PassLog(name, 0, before, before, (), True, kernels, kernels))
                continue
            ctx.decisions = []
            t0 = time.perf_counter_ns()
            program = self.override.get(name, fn)(program, ctx)
            wall = time.perf_counter_ns() - t0
            log.append(
                PassLog(
                    name, wall, before, len(program.ops), tuple(ctx.decisions), False, kernels, len(program.kernels)
                )
            )
            programs[name] = program
        return Compiled(program, tuple(log), programs)


def compile_model(
    model: Any, example_inputs: tuple, hardware: AccelSpec, precision: str = "fp32", **kw: Any
) -> Compiled:
    """The default pipeline over `model` for `hardware` at `precision` (CompileContext fields in `kw`)."""
    return Pipeline().run(model, example_inputs, CompileContext(hardware, precision, **kw))
