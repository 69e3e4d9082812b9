"""torch is an optional extra: everything but `perf profile` and `perf calibrate` runs without it.

Each command runs in a fresh interpreter where `import torch` fails (sys.modules['torch'] = None,
what a `pip install .` without the extra sees). The real lean install (a fresh venv, no torch)
is .ci/lean_install.sh, which CI runs after `make test`.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "examples" / "traces" / "mlp_cpu.json.gz"
NEEDS_TORCH = "needs torch: pip install 'perf-suite[profile]'"

# Runs the CLI with torch unimportable, then fails if anything still managed to import it.
WITHOUT_TORCH = """
import sys
sys.modules["torch"] = None
from profiler.cli import main
try:
    main(sys.argv[1:])
finally:
    assert not any(m == "torch" or m.startswith("torch.") for m in sys.modules if sys.modules[m] is not None)
"""


def perf_without_torch(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_TORCH, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def test_torch_is_an_extra_not_a_dependency():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not [d for d in project["dependencies"] if d.startswith("torch")]
    assert any(d.startswith("torch") for d in project["optional-dependencies"]["profile"])


def test_analyze_without_torch():
    r = perf_without_torch("analyze", str(TRACE), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["schema"] == "perf.analyze"


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["analyze", str(TRACE)],
        ["diff", str(TRACE), str(TRACE)],
        ["gate", "--base", str(TRACE), "--new", str(TRACE)],
        ["hardware", "list"],
    ],
)
def test_everyday_commands_without_torch(args):
    r = perf_without_torch(*args)
    assert r.returncode == 0, r.stderr


def test_export_without_torch(tmp_path):
    r = perf_without_torch("export", str(TRACE), "-o", str(tmp_path / "t.pftrace"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "t.pftrace").stat().st_size > 0


@pytest.mark.parametrize("command", [["profile", "train.py"], ["profile", "--model", "m:f"], ["calibrate", "--quick"]])
def test_torch_commands_say_what_they_need(command, tmp_path):
    r = perf_without_torch(*command, cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip() == f"perf {command[0]} {NEEDS_TORCH}"
    assert not list(tmp_path.iterdir())  # nothing written


def test_python_api_profile_says_what_it_needs():
    code = "import sys; sys.modules['torch'] = None; import profiler; profiler.profile"
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode != 0
    assert f"profiler.profile {NEEDS_TORCH}" in r.stderr.splitlines()[-1]
