"""`perf compile MODEL --accel PRESET_OR_YAML [--input SHAPE] [--precision POLICY] [--dump-ir DIR]
[--precision-override MODULE=POLICY]... [--no-host-fallback] [--plan PLAN] [--chips N] [--check] [--json]
[--trace FILE] [-o PROGRAM.json[.gz]]`:
lower a model onto the accelerator (accelerator/compiler) and print the pass table, the kernels
(their fused ops and tiles), and with --check the functional error per layer. `-o` saves the
compiled program, without weights, for `perf simulate` (accelerator/compiler/saved.py). `--plan` reads a
fusion plan (JSON or YAML: groups of op names, optional tiles; accelerator/compiler/fusion.py).

MODEL: a built-in workload (`mlp`, `resnet`, `vit`, `llama`; `llama2-7b`, `llama3-8b` on the meta
device, compile only) or `pkg.module:factory` (as `perf profile --model`): a factory called
with no arguments that returns an nn.Module, its inputs from `--input` or, without it, from the
module's `example_inputs` tuple. Registered on the CLI by `register(app)`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from profiler.cli.common import app


def _model_and_inputs(model: str, inputs: list[str]) -> tuple[Any, tuple]:
    from profiler import api
    from profiler.model.errors import InputError

    if ":" not in model:
        workloads = api.accel_workloads
        if model not in workloads:
            raise InputError(None, f"{model}: not a workload ({', '.join(workloads)}) nor MODULE:FACTORY")
        return workloads[model]()
    if inputs:
        m, xs = api.prepare_model(model, inputs)
        return m.cpu().eval(), tuple(x.cpu() for x in xs)
    m = api.load_factory(model)()
    xs = getattr(m, "example_inputs", None)
    if not isinstance(xs, tuple):
        raise InputError(None, f"--model {model}: give --input SHAPE or an example_inputs tuple on the module")
    return m.eval(), xs


KERNELS_SHOWN = 40


def _print_text(doc: dict) -> None:
    print(f"{doc['model']} on {doc['accel']}, precision {doc['precision']}")
    print(f"{'pass':<12}{'ms':>10}{'ops before':>12}{'ops after':>11}{'kernels':>9}  decisions")
    for p in doc["passes"]:
        ms = "skipped" if p["skipped"] else f"{p['wall_ns'] / 1e6:.1f}"
        kernels = p.get("kernels_after") or "-"
        print(f"{p['name']:<12}{ms:>10}{p['ops_before']:>12}{p['ops_after']:>11}{kernels:>9}  {len(p['decisions'])}")
        for d in p["decisions"][:5]:
            print(f"    {d['op'] + ': ' if d['op'] else ''}{d['what']} ({d['why']})")
        if len(p["decisions"]) > 5:
            print(f"    ... {len(p['decisions']) - 5} more (--json has them all)")
    units: dict[str, int] = {}
    for k in doc["kernels"]:
        units[k["unit"]] = units.get(k["unit"], 0) + 1
    fused = sum(len(k["ops"]) for k in doc["kernels"])
    print(
        f"kernels: {len(doc['kernels'])} ("
        + ", ".join(f"{u} {n}" for u, n in sorted(units.items()))
        + f") running {fused} ops"
    )
    shown = [k for k in doc["kernels"] if k["unit"] != "dma" or len(k["ops"]) > 1]
    for k in shown[:KERNELS_SHOWN]:
        tile = " ".join(f"{d}={v}" for d, v in k["tile"].items()) if k["tile"] else "-"
        local = f"{k['local_bytes'] / 1024:.1f} KiB" if k["local_bytes"] is not None else ""
        flash = f" [{k['attention']} attention]" if k["attention"] else ""
        print(f"    {k['name']:<24} {k['unit']:<7} {tile:<21}{local:>11}  {' + '.join(k['ops'])}{flash}")
    hidden = len(doc["kernels"]) - min(len(shown), KERNELS_SHOWN)
    if hidden:
        print(f"    ... {hidden} more (single data-movement kernels and the rest; --json has them all)")
    _print_memory(doc)
    for h in doc["host"]:
        if h["diagnostic"]:
            print(f"host: {h['diagnostic']}; cut {h['cut_in_bytes']} B to the host, {h['cut_out_bytes']} B back")
    if doc["chips"] > 1:
        kinds = [c["op"] for c in doc["collectives"]]
        sent = sum(c["bytes"] for c in doc["collectives"])
        reduces, gathers = kinds.count("all_reduce"), kinds.count("all_gather")
        print(f"chips: {doc['chips']}, {reduces} all-reduce, {gathers} all-gather, {sent} B sent per chip")
    if "check" in doc:
        c = doc["check"]
        verdict = "within" if c["max_rel_error"] <= c["bound"] else "OVER"
        print(f"check: max relative error {c['max_rel_error']:.2e}, {verdict} the bound {c['bound']:g}")
        for layer in sorted(c["layers"], key=lambda x: -x["rel_error"])[:10]:
            print(f"    {layer['name']:<40}{layer['rel_error']:.2e}")


def _bytes(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _print_memory(doc: dict, limit: int = 40) -> None:
    """Peaks against capacity, the DMA bytes per route, and where each kernel's outputs live."""
    mem = doc.get("memory")
    if mem:
        cap = mem["capacity"]
        print(
            f"memory: peak on-chip {_bytes(mem['peak_onchip_bytes'])} of {_bytes(cap['shared'])} shared, "
            f"peak HBM {_bytes(mem['peak_hbm_bytes'])} of {_bytes(cap['hbm'])}"
        )
    moves = doc.get("transfers")
    if moves and moves["count"]:
        routes = ", ".join(f"{r} {_bytes(b)}" for r, b in moves["by_route"].items())
        print(f"transfers: {moves['count']} DMA, {_bytes(moves['total_bytes'])} ({routes})")
    placed = [k for k in doc["kernels"] if k.get("placement")]
    for k in placed[:limit]:
        where = ", ".join(f"{p['value']} {p['level']}@{p['offset']} {_bytes(p['bytes'])}" for p in k["placement"])
        print(f"    {k['name']:<32}{k['unit']:<8}{where}")
    if len(placed) > limit:
        print(f"    ... {len(placed) - limit} more kernels (--json has them all)")


def register(app: typer.Typer) -> None:
    @app.command("compile")
    def compile_cmd(
        model: Annotated[str, typer.Argument(help="A workload (mlp, resnet, vit, llama) or MODULE:FACTORY.")] = "",
        model_opt: Annotated[str, typer.Option("--model", help="MODEL as an option.")] = "",
        accel: Annotated[str, typer.Option("--accel", help="edge-npu, datacenter-npu or a YAML file.")] = "",
        input: Annotated[list[str], typer.Option("--input", help="SHAPE[:dtype], repeatable.")] = [],  # noqa: B006
        precision: Annotated[str, typer.Option("--precision", help="fp32, bf16, int8 or fp8.")] = "fp32",
        override: Annotated[
            list[str], typer.Option("--precision-override", help="MODULE=POLICY for one layer, repeatable.")
        ] = [],  # noqa: B006
        no_host_fallback: Annotated[
            bool, typer.Option("--no-host-fallback", help="Stop on an op the accelerator cannot run.")
        ] = False,
        plan: Annotated[
            Path | None, typer.Option("--plan", help="Fusion plan (JSON/YAML: groups of op names, tiles).")
        ] = None,
        chips: Annotated[int, typer.Option("--chips", help="Tensor-parallel over N chips of the preset.")] = 1,
        dump_ir: Annotated[Path | None, typer.Option("--dump-ir", help="Write the MLIR after every pass here.")] = None,
        check: Annotated[
            bool, typer.Option("--check", help="Run it kernel by kernel, tile by tile, and compare with eager.")
        ] = False,
        json: Annotated[bool, typer.Option("--json", help="Write the result as JSON.")] = False,
        trace: Annotated[
            Path | None, typer.Option("--trace", help="Write the passes as a trace (.json or .json.gz).")
        ] = None,
        output: Annotated[
            Path | None,
            typer.Option("-o", "--output", help="Save the compiled program (.json or .json.gz) for perf simulate."),
        ] = None,
        force: Annotated[
            bool, typer.Option("--force", help="Overwrite files in --dump-ir, --trace and --output.")
        ] = False,
    ) -> None:
        """Lower a model onto the accelerator: capture, decomposition, precision, legalisation,
        fusion, tiling, memory allocation and scheduling."""
        from profiler.cli.common import fail, one_line_errors, require_torch

        name = model or model_opt
        if not name or (model and model_opt and model != model_opt):
            fail("give MODEL once (positionally or as --model)")
        if not accel:
            fail("--accel PRESET_OR_YAML is required (presets: datacenter-npu, edge-npu)")
        require_torch("compile")
        with one_line_errors(Path(name)):
            from profiler import api
            from profiler.model.errors import InputError
            from profiler.model.files import check_writable, write_atomic

            if output is not None:  # before the compile, which may take a while
                check_writable(output, force=force, inputs=[plan] if plan is not None else [])
            hw = api.load_accel(accel)
            overrides = {}
            for item in override:
                module, sep, policy = item.partition("=")
                if not sep or not module or not policy:
                    raise InputError(None, f"--precision-override {item}: expected MODULE=POLICY, e.g. lm_head=fp32")
                overrides[module] = policy
            fusion_plan = api.accel_load_plan(plan) if plan is not None else None
            m, xs = _model_and_inputs(name, input)
            if check and any(t.is_meta for t in (*m.parameters(), *m.buffers())):
                raise InputError(None, f"{name}: --check needs real weights; this model's are on the meta device")
            compiled = api.compile_model(
                m,
                xs,
                hw,
                precision,
                precision_overrides=overrides,
                host_fallback=not no_host_fallback,
                plan=fusion_plan,
                chips=chips,
            )
            result = None
            if check:
                reference = compiled.programs.get("decompose", compiled.programs["capture"])
                result = api.accel_check(compiled.program, m, xs, reference, api.accel_bounds[precision])
            doc = api.accel_report(compiled, model=name, accel=hw.name, precision=precision, check=result, hardware=hw)
            if trace is not None:
                import gzip

                import orjson

                data = orjson.dumps(api.accel_trace_document(compiled.log, doc))
                write_atomic(trace, gzip.compress(data) if trace.name.endswith(".gz") else data, force=force)
            if output is not None:
                api.save_program(
                    compiled,
                    output,
                    hardware_name=hw.name,
                    hardware_source=accel,
                    precision=precision,
                    model=name,
                    force=force,
                )
            if dump_ir is not None:
                dump_ir.mkdir(parents=True, exist_ok=True)
                for i, (pass_name, program) in enumerate(compiled.programs.items()):
                    text = api.to_mlir(program).encode()
                    write_atomic(dump_ir / f"{i:02d}-{pass_name}.mlir", text, force=force)
        if json:
            import orjson

            sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
        else:
            _print_text(doc)
        if result is not None and not result.ok:
            raise typer.Exit(1)


register(app)
