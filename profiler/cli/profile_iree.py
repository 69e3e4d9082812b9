"""`perf profile MODEL --backend iree`: the model through IREE (profiler.api.iree), the trace
written, and a report of the pass tree and the dispatches (text, or --json)."""

from __future__ import annotations

import sys
from pathlib import Path

from profiler.cli.common import one_line_errors
from profiler.cli_usage import one_line
from profiler.model.errors import InputError


def profile_iree_cli(
    backend: str,
    model: str | None,
    inputs: list[str],
    dtype: str | None,
    flags: list[str],
    output: Path | None,
    hardware: str | None,
    as_json: bool,
    force: bool,
    steps: int | None,
) -> None:
    """Run and report (module docstring); every failure one line, exit 2."""
    with one_line_errors(Path(model or "profile")):
        if backend != "iree":
            raise InputError(None, f"--backend {backend}: choose eager, iree or onnxruntime")
        if not model:
            raise InputError(
                None, "--backend iree profiles a model: perf profile MODULE:FACTORY --backend iree --input SHAPE"
            )
        from profiler.api.iree import RUNS, iree_available, profile_iree

        missing = iree_available()
        if missing:
            raise InputError(model, missing)
        from profiler.api import prepare_model
        from profiler.model.files import check_writable

        out = check_writable(output or Path(f"perf-iree-{model.rpartition(':')[2]}.json.gz"), force=force)
        module, xs = prepare_model(model, inputs, dtype or "fp32", False)
        run = profile_iree(
            module.eval(), list(xs), out=out, flags=tuple(flags), hardware=hardware, runs=steps or RUNS, label=model
        )
    print(one_line(f"wrote {out}"), file=sys.stderr)
    if as_json:
        import orjson

        sys.stdout.buffer.write(orjson.dumps(run.doc(), option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE))
        return
    from profiler.render import console
    from profiler.render.iree import render_iree

    console().print(render_iree(run))
