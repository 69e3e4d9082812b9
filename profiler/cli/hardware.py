"""`perf hardware list|show` and `perf calibrate`: the specs the roofline is drawn against."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from profiler.cli.common import Force, app, fail, one_line_errors, require_torch
from profiler.model.errors import printable

hardware_app = typer.Typer(no_args_is_help=True, help="Hardware specs: the ceilings the roofline is drawn against.")
app.add_typer(hardware_app, name="hardware")


@hardware_app.command("list")
def hardware_list() -> None:
    """List the bundled presets (the accelerator's too: their roofline specs are derived)."""
    from profiler import api
    from profiler.model.hardware import load_spec, presets

    for name in presets():
        spec = load_spec(name)
        print(f"{name:24} {spec.kind:4} {spec.vendor}")
    for name in api.accel_presets():
        print(f"{name:24} npu  simulated (accelerator/presets; perf simulate)")


@hardware_app.command("show")
def hardware_show(name: Annotated[str, typer.Argument(help="A preset name or a spec YAML file.")]) -> None:
    """Show one spec: peaks, memory levels, links, minimum op time and sources."""
    from rich.table import Table

    from profiler.api import load_hardware
    from profiler.model.hardware_describe import describe

    with one_line_errors(Path(name)):
        spec = load_hardware(name)
        table = Table(title=spec.name, title_justify="left", show_header=False)
        table.add_column(style="bold")
        table.add_column(overflow="fold")
        for label, value in describe(spec):
            table.add_row(label, value)
        from profiler.render import console

        console().print(table)


@app.command()
def calibrate(
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the measured spec (YAML).")] = Path(
        "calibrated.yaml"
    ),
    quick: Annotated[bool, typer.Option(help="Small sizes: seconds instead of a minute, rougher figures.")] = False,
    links: Annotated[bool, typer.Option(help="Also measure gloo all_reduce between two local processes.")] = True,
    force: Force = False,
) -> None:
    """Measure this machine's ceilings (matmul FLOP/s per dtype, bandwidth, op time, link) into a spec."""
    require_torch("calibrate")
    from rich.progress import Progress

    from profiler import calibrate as cal
    from profiler.model.files import check_writable
    from profiler.model.hardware import save_spec
    from profiler.render import console

    with one_line_errors(output):  # before a minute of measuring, not after
        check_writable(output, force=force)
    # no auto-refresh: a redraw thread would compete with the measured ops for the cores
    with one_line_errors(output), Progress(console=console(stderr=True), transient=True, auto_refresh=False) as bar:
        steps = 4 + len(cal.MATRIX_DTYPES) + int(links)
        task = bar.add_task("calibrating", total=steps)

        def step(what: str) -> None:
            if what.startswith(cal.NOTE_PREFIXES):  # a figure rejected or left out: said, and kept on screen
                bar.console.print(f"perf calibrate: {what}")
                return
            bar.update(task, description=what, advance=1)
            bar.refresh()

        try:
            specs = cal.calibrate(cal.Sizes.quick() if quick else cal.Sizes(), progress=step, links=links)
        except cal.CalibrationError as e:
            fail(f"calibration rejected: {e}; nothing written (rerun on a quiet machine)", str(output))
        bar.update(task, completed=steps)
    for i, spec in enumerate(specs):
        path = output if i == 0 else output.with_name(f"{output.stem}-{spec.kind}{output.suffix}")
        with one_line_errors(path):
            save_spec(spec, path, force=force)
        print(printable(f"wrote {path} ({spec.name}); use it with --hardware {path}"))
