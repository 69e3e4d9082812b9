"""The workload being tuned, the space built from its compiled program, and a candidate turned
back into a compiled program through the compiler's own pipeline (accelerator/compiler).

A candidate compiles as: the baseline's decomposed program (captured and decomposed once),
then the default passes from precision on, with the candidate's per-layer policies
(`CompileContext.precision_overrides`), chips, and two passes wrapped: fusion runs the
automatic plan with the candidate's `split` regions split (then `fuse` on that plan), tiling
runs with the candidate's tiles for the kernels the program has (a tile naming a kernel another
choice removed is dropped)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

from profiler.autotune.space import LEVERS, MAX_TILES, Candidate, Dimension, Space


@dataclass(frozen=True)
class Workload:
    """A model compiled for a preset: `compiled` the baseline (the compiler's own plan),
    `decomposed` the program precision assignment starts from, `hash` of the decomposed
    program's MLIR text, the preset and the policy (what a trial's result depends on)."""

    name: str
    model: Any
    inputs: tuple
    hw: Any  # AccelSpec
    hardware_source: str
    precision: str
    compiled: Any  # Compiled
    decomposed: Any  # Program
    hash: str


def load_workload(name: str, model: Any, inputs: tuple, hw: Any, precision: str, source: str = "") -> Workload:
    """Compile `model` once with the compiler's own plan: the baseline every candidate changes."""
    from accelerator.compiler.mlir import to_mlir
    from accelerator.compiler.pipeline import compile_model

    compiled = compile_model(model, inputs, hw, precision)
    decomposed = compiled.programs.get("decompose", compiled.programs["capture"])
    text = f"{to_mlir(decomposed)}\n{hw.name}\n{precision}"
    digest = hashlib.sha256(text.encode()).hexdigest()
    return Workload(name, model, inputs, hw, source or hw.name, precision, compiled, decomposed, digest)


def _anchor(graph: Any, ops: tuple[str, ...]) -> str | None:
    return next((o for o in ops if graph.kind(o) in ("matmul", "attention")), None)


def split_groups(graph: Any, ops: tuple[str, ...]) -> list[tuple[str, ...]]:
    """A fused region split: a matmul/attention keeps its prologue (the ops before it), the
    rest run alone; a vector chain runs op by op (fusion.check_group must accept the kept one)."""
    from accelerator.compiler.fusion import check_group

    anchor = _anchor(graph, ops)
    if anchor is None:
        return [(o,) for o in ops]
    head = tuple(o for o in ops if graph.index[o] <= graph.index[anchor])
    if check_group(graph, head) is not None:
        head = (anchor,)
    return [head] + [(o,) for o in ops if o not in head]


def _tile_options(program: Any, kernel: Any, hw: Any) -> list[tuple[tuple[str, int], ...]]:
    """The kernel's tiles that fit local memory (double buffered), the compiler's first, then
    by output reuse (tm*tn, then tk) down, at most MAX_TILES (accelerator/compiler/tiling.py
    fitting_tiles: the tiling pass's own formulas and order)."""
    from accelerator.compiler.tiling import fitting_tiles

    if kernel.tile is None:
        return []
    chosen = tuple(sorted(kernel.tile.items()))
    rest = [tuple(sorted(t.items())) for t in fitting_tiles(program, kernel, hw)]
    return list(dict.fromkeys([chosen, *rest]))[:MAX_TILES]


def _policies(hw: Any, base: str) -> list[str]:
    from accelerator.compiler.precision import POLICIES

    usable = [p for p in POLICIES if p != "fp8" or "fp8" in hw.matrix_dtypes()]
    return [base] + [p for p in usable if p != base]


def build_space(w: Workload, levers: tuple[str, ...] = LEVERS) -> Space:
    """The joint space of `w` (module docstring of profiler/autotune/space.py) over `levers`."""
    from accelerator.compiler.fusion import Graph, auto_plan
    from accelerator.compiler.pipeline import CompileContext

    program = w.compiled.program
    dims: list[Dimension] = []
    if "tile" in levers:
        for k in program.kernels:
            if k.unit == "matrix" and k.tile:
                options = _tile_options(program, k, w.hw)
                if len(options) > 1:
                    dims.append(Dimension(f"tile:{k.name}", "tile", tuple(options), (k.name,)))
    if "fusion" in levers:
        partitioned = w.compiled.programs.get("partition", w.compiled.programs.get("legalize"))
        graph = Graph(partitioned)
        for g in auto_plan(partitioned, CompileContext(w.hw, w.precision)).groups:
            if len(g.ops) > 1 and len(split_groups(graph, g.ops)) > 1:
                dims.append(Dimension(f"fusion:{g.name}", "fusion", ("fused", "split"), (g.name,)))
    if "precision" in levers:
        seen: dict[str, list[str]] = {}
        for k in program.kernels:
            if k.unit == "matrix":
                ops = {o.name: o for o in program.ops}
                module = next((ops[o].module for o in k.ops if ops[o].attrs.get("unit") == "matrix"), "")
                if module:
                    seen.setdefault(module, []).append(k.name)
        for module, kernels in seen.items():
            dims.append(
                Dimension(
                    f"precision:{module}", "precision", tuple(_policies(w.hw, w.precision)), tuple(kernels), module
                )
            )
    if "chips" in levers and w.hw.chips > 1:
        counts = [c for c in (1, 2, 4, 8, 16, 32) if c <= w.hw.chips]
        dims.append(Dimension("chips", "chips", tuple(counts), tuple(k.name for k in program.kernels)))
    return Space(tuple(dims), w.precision, w.name, w.hw.name)


def compile_candidate(w: Workload, space: Space, c: Candidate) -> Any:
    """`c` through the compiler's pipeline (module docstring) -> Compiled."""
    from accelerator.compiler.fusion import FusionPlan, Graph, auto_plan, fuse
    from accelerator.compiler.pipeline import CompileContext, Pipeline
    from accelerator.compiler.tiling import tile_kernels

    chosen = dict(c.choices)
    split = {n.split(":", 1)[1] for n, o in chosen.items() if n.startswith("fusion:") and o == "split"}
    tiles = {n.split(":", 1)[1]: dict(o) for n, o in chosen.items() if n.startswith("tile:")}
    overrides = {space.dimension(n).module: o for n, o in chosen.items() if n.startswith("precision:")}

    def fusion(program: Any, ctx: Any) -> Any:
        plan = auto_plan(program, ctx)
        graph = Graph(program)
        groups = []
        for g in plan.groups:
            if g.name in split:
                parts = split_groups(graph, g.ops)
                groups += [replace(g, name=(g.name if _anchor(graph, p) else p[0]), ops=p) for p in parts]
            else:
                groups.append(g)
        ctx.plan = FusionPlan(tuple(groups), "autotune")
        return fuse(program, ctx)

    def tiling(program: Any, ctx: Any) -> Any:
        names = {k.name for k in program.kernels}
        ctx.tiles = {k: t for k, t in tiles.items() if k in names}
        return tile_kernels(program, ctx)

    ctx = CompileContext(w.hw, w.precision, precision_overrides=overrides, chips=int(chosen.get("chips", 1)))
    pipeline = Pipeline(skip=["decompose"], override={"fusion": fusion, "tiling": tiling})
    return pipeline.run_program(w.decomposed, ctx, [], {"decompose": w.decomposed})


def plan_document(w: Workload, space: Space, c: Candidate, compiled: Any) -> dict[str, Any]:
    """The plan file of `c` (what `perf compile --plan` and `perf simulate --plan` read: every
    kernel's ops and tile), with the precision and chips the plan was compiled at and the
    command that reproduces it (a plan file holds no precision: pass these flags with it)."""
    chosen = dict(c.choices)
    overrides = {space.dimension(n).module: o for n, o in chosen.items() if n.startswith("precision:")}
    chips = int(chosen.get("chips", 1))
    kernels = [
        {"name": k.name, "ops": list(k.ops), **({"tile": dict(k.tile)} if k.tile else {})}
        for k in compiled.program.kernels
    ]
    flags = f"--accel {w.hardware_source} --precision {w.precision}" + "".join(
        f" --precision-override {m}={p}" for m, p in sorted(overrides.items())
    )
    flags += f" --chips {chips}" if chips > 1 else ""
    return {
        "kernels": kernels,
        "candidate_hash": c.hash,
        "candidate": c.to_json(),
        "model": w.name,
        "accel": w.hw.name,
        "precision": w.precision,
        "precision_overrides": overrides,
        "chips": chips,
        "flags": flags,
    }
