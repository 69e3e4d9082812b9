"""IREE failures are one line with the tool's own first error line, exit 2: IREE missing, a
compile error, a model IREE cannot export."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler.cli import app

MODELS = str(Path(__file__).parent / "iree_models.py")


def _one_line_exit_2(r) -> str:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1, r.output
    assert "Traceback" not in r.output
    return lines[0]


def test_iree_missing(monkeypatch):
    import collectors.iree.capture as capture

    monkeypatch.setattr(capture, "iree_available", lambda: "IREE is not installed (ImportError: no iree)")
    r = CliRunner().invoke(app, ["profile", f"{MODELS}:mlp", "--backend", "iree", "--input", "16x64"])
    line = _one_line_exit_2(r)
    assert "IREE is not installed" in line and "ImportError: no iree" in line


def test_unknown_backend():
    r = CliRunner().invoke(app, ["profile", "--model", f"{MODELS}:mlp", "--backend", "xla", "--input", "16x64"])
    assert "--backend xla" in _one_line_exit_2(r)


def test_compile_error_is_the_compilers_first_error(tmp_path):
    pytest.importorskip("iree.compiler")
    from collectors.iree.compile import compile_module
    from profiler.model.errors import InputError

    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n  return %b : tensor<4xf32>\n}\n")
    with pytest.raises(InputError) as e:
        compile_module(bad, tmp_path)
    # iree-compile: "<file>:2:10: error: use of undeclared SSA value name"
    assert "error: use of undeclared SSA value name" in e.value.problem
    assert "\n" not in e.value.problem


def test_bad_compiler_flag_via_cli(tmp_path):
    pytest.importorskip("iree.turbine.aot")
    r = CliRunner().invoke(
        app,
        [
            "profile",
            f"{MODELS}:mlp",
            "--backend",
            "iree",
            "--input",
            "16x64",
            "-o",
            str(tmp_path / "t.json.gz"),
            "--iree-flag=--iree-no-such-flag",
        ],
    )
    line = _one_line_exit_2(r)
    assert "iree-compile failed" in line and "iree-no-such-flag" in line


def test_model_iree_cannot_export(tmp_path):
    pytest.importorskip("iree.turbine.aot")
    r = CliRunner().invoke(
        app,
        ["profile", f"{MODELS}:unexportable", "--backend", "iree", "--input", "4", "-o", str(tmp_path / "t.json.gz")],
    )
    line = _one_line_exit_2(r)
    assert "IREE cannot export the model" in line


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))
