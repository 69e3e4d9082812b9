"""`perf compile MODEL --accel PRESET_OR_YAML [--input SHAPE] [--precision POLICY] [--dump-ir DIR]
[--precision-override MODULE=POLICY]... [--no-host-fallback] [--chips N] [--check] [--json] [--trace FILE]`:
lower a model onto the accelerator (accelerator/compiler) and print the pass table, the kernels,
and with --check the functional error per layer.

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


def _print_text(doc: dict) -> None:
    print(f"{doc['model']} on {doc['accel']}, precision {doc['precision']}")
    print(f"{'pass':<12}{'ms':>10}{'ops before':>12}{'ops after':>11}  decisions")
    for p in doc["passes"]:
        ms = "skipped" if p["skipped"] else f"{p['wall_ns'] / 1e6:.1f}"
        print(f"{p['name']:<12}{ms:>10}{p['ops_before']:>12}{p['ops_after']:>11}  {len(p['decisions'])}")
        for d in p["decisions"][:5]:
            print(f"    {d['op'] + ': ' if d['op'] else ''}{d['what']} ({d['why']})")
        if len(p["decisions"]) > 5:
            print(f"    ... {len(p['decisions']) - 5} more (--json has them all)")
    units: dict[str, int] = {}
    for k in doc["kernels"]:
        units[k["unit"]] = units.get(k["unit"], 0) + 1
    print(f"kernels: {len(doc['kernels'])} (" + ", ".join(f"{u} {n}" for u, n in sorted(units.items())) + "), unfused")
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
        chips: Annotated[int, typer.Option("--chips", help="Tensor-parallel over N chips of the preset.")] = 1,
        dump_ir: Annotated[Path | None, typer.Option("--dump-ir", help="Write the MLIR after every pass here.")] = None,
        check: Annotated[bool, typer.Option("--check", help="Run it op by op and compare with eager.")] = False,
        json: Annotated[bool, typer.Option("--json", help="Write the result as JSON.")] = False,
        trace: Annotated[
            Path | None, typer.Option("--trace", help="Write the passes as a trace (.json or .json.gz).")
        ] = None,
        force: Annotated[bool, typer.Option("--force", help="Overwrite files in --dump-ir and --trace.")] = False,
    ) -> None:
        """Lower a model onto the accelerator: capture, decomposition, precision, legalisation."""
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
            from profiler.model.files import write_atomic

            hw = api.load_accel(accel)
            overrides = {}
            for item in override:
                module, sep, policy = item.partition("=")
                if not sep or not module or not policy:
                    raise InputError(None, f"--precision-override {item}: expected MODULE=POLICY, e.g. lm_head=fp32")
                overrides[module] = policy
            m, xs = _model_and_inputs(name, input)
            if check and any(t.is_meta for t in (*m.parameters(), *m.buffers())):
                raise InputError(None, f"{name}: --check needs real weights; this model's are on the meta device")
            compiled = api.compile_model(
                m, xs, hw, precision, precision_overrides=overrides, host_fallback=not no_host_fallback, chips=chips
            )
            result = None
            if check:
                reference = compiled.programs.get("decompose", compiled.programs["capture"])
                result = api.accel_check(compiled.program, m, xs, reference, api.accel_bounds[precision])
            doc = api.accel_report(compiled, model=name, accel=hw.name, precision=precision, check=result)
            if trace is not None:
                import gzip

                import orjson

                data = orjson.dumps(api.accel_trace_document(compiled.log, doc))
                write_atomic(trace, gzip.compress(data) if trace.name.endswith(".gz") else data, force=force)
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
