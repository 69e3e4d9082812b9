"""profiler/cli/plain_values.py: the plain coercion gives what Typer's own gives, value for value,
and `perf analyze` no longer imports pydantic to read its arguments."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import typer
import typer.main

from profiler.cli import app
from profiler.cli.plain_values import _plain, seed

REPO = Path(__file__).resolve().parent.parent


def _params():
    """Every parameter of every command on the root group, and the group's own."""
    group = typer.main.get_command(app)
    ctx = group.make_context("perf", ["analyze", "x"], resilient_parsing=True)
    out = [(group.name, p) for p in group.get_params(ctx)]
    for name, cmd in group.commands.items():
        out += [(name, p) for p in cmd.get_params(ctx)]
    return out, ctx


def _typer_coerce(param, value, ctx):
    """What Typer itself makes of `value` (its own runtime param, built as without seeding)."""
    from typer._coercion import build_runtime_param

    try:
        return ("ok", build_runtime_param(param.type_descriptor).coerce(value, param=param, ctx=ctx))
    except Exception as e:  # noqa: BLE001 - compared by type
        return ("error", type(e).__name__)


def _ours(param, value, ctx):
    plain = _plain(param)
    assert plain is not None
    param._runtime_param = plain
    try:
        return ("ok", plain.coerce(value, param=param, ctx=ctx))
    except Exception as e:  # noqa: BLE001
        return ("error", type(e).__name__)


def test_same_values_as_typer(tmp_path):
    pytest.importorskip("typer._coercion", reason="Typer before 0.2x: no pydantic coercion to skip")
    unreadable = tmp_path / "locked"
    unreadable.write_text("x")
    unreadable.chmod(0)
    samples = [None, "15", "0", "-3", "1_000", " 7", "+4", "1.5", "abc", "", "512M", "2G", "1x",
               15, True, False, str(REPO / "README.md"), str(tmp_path / "missing.json"), str(tmp_path),
               ("ops", "llm"), (), ["a"]]  # fmt: skip
    if os.geteuid() != 0:  # root reads anything: the unreadable case needs a normal user
        samples.append(str(unreadable))
    params, ctx = _params()
    covered = 0
    for command, param in params:
        if _plain(param) is None:
            continue
        covered += 1
        for value in samples:
            if param.multiple != isinstance(value, (list, tuple)) and value is not None:
                continue  # click hands a multiple option a tuple, any other a single value
            want, got = _typer_coerce(param, value, ctx), _ours(param, value, ctx)
            assert got == want, (command, param.name, value, got, want)
            assert type(got[1]) is type(want[1]), (command, param.name, value)
    assert covered >= 30  # analyze alone has 11 plain parameters, and every command a --help


def test_analyze_reads_its_arguments_without_pydantic(tmp_path):
    """Before: Typer built a pydantic TypeAdapter per parameter (pydantic imported, ~0.3 s)."""
    code = (
        "import sys\n"
        "from profiler.cli import main\n"
        "try:\n"
        f"    main(['analyze', {str(tmp_path / 'none.json')!r}, '--json', '--top', '3', '--section', 'ops',"
        " '--max-bytes', '1G'])\n"
        "except SystemExit as e:\n"
        "    print(e.code, 'pydantic' in sys.modules)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    assert out.stdout.split() == ["2", "False"], out.stdout + out.stderr
    assert "none.json: no such file or directory" in out.stderr


def test_bad_values_keep_typers_message():
    """A value the plain coercion does not take goes to Typer, whose message is the one shown."""
    from typer.testing import CliRunner

    r = CliRunner().invoke(app, ["analyze", "x.json", "--top", "0"])
    assert r.exit_code == 2
    assert "Invalid value for '--top'" in r.output and "greater than or equal to 1" in r.output
    r = CliRunner().invoke(app, ["analyze", "x.json", "--max-bytes", "1x"])
    assert r.exit_code == 2 and "'1x' is not a size" in r.output


def test_seed_leaves_other_typers_alone():
    """Parameters without Typer 0.2x's `_runtime_param` are not touched."""

    class Old:
        name, multiple, nargs = "x", False, 1

    class Command:
        def get_params(self, ctx):
            return [Old()]

    seed(Command(), None)
    assert not hasattr(Old, "_runtime_param")
