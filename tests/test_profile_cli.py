"""`perf profile`: real torch.profiler runs of a script and of model factories, and its bad input.

Success paths run in-process through Typer's runner; the checks of stderr's one-line contract run
`python -m profiler` in a subprocess, because Kineto writes to file descriptor 2 directly and
only a real process shows what reaches it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler.cli import app
from profiler.api import load_trace

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()

MATMULS = """\
import sys
import torch
import profiler

M, K, N = 64, 128, 32
a, b = torch.randn(M, K), torch.randn(K, N)
for _ in range(int(sys.argv[1])):
    c = a @ b
    profiler.step()
print("args", sys.argv[1:])
"""


def run(*args: object):
    return runner.invoke(app, [str(a) for a in args])


def perf(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "profiler", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(cwd)},
        timeout=300,
        check=False,
    )


def one_line_error(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    return lines[0]


def steps_in(path: Path) -> list[str]:
    ev = load_trace(path).events
    return sorted(ev.loc[ev["name"].astype(str).str.startswith("ProfilerStep#"), "name"].astype(str))


def test_script_matmuls_flops_and_steps(tmp_path, monkeypatch):
    script = tmp_path / "matmuls.py"
    script.write_text(MATMULS)
    monkeypatch.chdir(tmp_path)
    r = run("profile", "--json", script, "3", "--json")  # the second --json is the script's own argument
    assert r.exit_code == 0, r.output
    out = tmp_path / "perf-matmuls.json.gz"  # default name: perf-<script stem>.json.gz in the cwd
    assert out.is_file() and f"wrote {out.name}" in r.stderr
    assert "args ['3', '--json']" in r.stderr  # with --json the script's prints go to stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "perf.analyze"
    mm = [o for o in doc["ops"] if o["name"] == "aten::mm"]
    assert len(mm) == 1 and mm[0]["shapes"] == "[[64,128],[128,32]]" and mm[0]["count"] == 3
    # 2*M*N*K per call (one multiply-add is two FLOPs) = 2*64*32*128 = 524,288; three calls
    assert mm[0]["flops"] == 3 * 2 * 64 * 32 * 128 == 1_572_864
    # three marks end steps 0..2; the rest of the script (the print) is step 3
    assert steps_in(out) == ["ProfilerStep#0", "ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]


def test_script_schedule_records_only_active_steps(tmp_path):
    script = tmp_path / "matmuls.py"
    script.write_text(MATMULS)
    out = tmp_path / "sched.json.gz"
    r = run("profile", "-o", out, "--wait", 1, "--warmup", 1, "--active", 2, "--top", 3, script, 6)
    assert r.exit_code == 0, r.output
    assert "Top ops" in r.stdout and "aten::mm" in r.stdout
    # marks 0 (wait) and 1 (warm-up) are not recorded; steps 2 and 3 are
    assert steps_in(out) == ["ProfilerStep#2", "ProfilerStep#3"]
    assert (load_trace(out).events["name"] == "aten::mm").sum() == 2


def test_model_eager_three_steps(tmp_path):
    out = tmp_path / "mlp.json.gz"
    r = run("profile", "--model", "examples.models:mlp", "--input", "32x256", "--steps", 3, "-o", out, "--json")
    assert r.exit_code == 0, r.output
    # warm-up step 0 unprofiled, step 1 the profiler's warm-up, steps 2..4 recorded
    assert steps_in(out) == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    doc = json.loads(r.stdout)
    addmm = {o["shapes"]: o for o in doc["ops"] if o["name"] == "aten::addmm"}
    # Linear 256->1024 on 32 rows: 2*32*256*1024 = 16,777,216 FLOPs a call, one call per step
    first = next(o for s, o in addmm.items() if "[32,256]" in s)
    assert first["count"] == 3 and first["flops"] == 3 * 2 * 32 * 256 * 1024


def test_model_tiny_llama_backward(tmp_path):
    out = tmp_path / "llama.json.gz"
    r = run(
        "profile",
        "--model",
        "examples.models:tiny_llama",
        "--input",
        "2x16:int64",
        "--steps",
        2,
        "--backward",
        "-o",
        out,
    )
    assert r.exit_code == 0, r.output
    names = set(load_trace(out).events["name"].astype(str))
    assert {"forward", "backward", "aten::embedding", "aten::scaled_dot_product_attention", "aten::rms_norm"} <= names
    assert any(n.startswith("autograd::engine::evaluate_function") for n in names)


def test_model_compiled(tmp_path):
    """The one torch.compile run of this file (tens of seconds): the tiniest model."""
    out = tmp_path / "mlpc.json.gz"
    r = run("profile", "--model", "examples.models:mlp", "--input", "8x256", "--compile", "--steps", 2, "-o", out)
    assert r.exit_code == 0, r.output
    names = set(load_trace(out).events["name"].astype(str))
    assert any(n.startswith("Torch-Compiled Region") for n in names), sorted(names)
    assert any("CompiledFxGraph" in n or "CompiledFunction" in n for n in names), sorted(names)
    assert steps_in(out) == ["ProfilerStep#2", "ProfilerStep#3"]


def test_compare_compile_shows_what_fused(tmp_path):
    """mlp = Linear -> GELU -> Linear: Inductor keeps the addmms as extern kernels and fuses the
    GELU (x * 0.5 * (1 + erf(x / sqrt 2))) into one C++ kernel of mul, erf and add."""
    r = run(
        "profile", "--model", "examples.models:mlp", "--input", "8x256", "--compare-compile", "--steps", 2, "--json"
    )
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["schema"] == "perf.compare_compile" and doc["compiled"]
    fused = [g for g in doc["groups"] if g["kernel"].startswith("cpp_fused")]
    assert fused and set(fused[0]["aten_ops"].split(" + ")) == {"aten::add", "aten::erf", "aten::mul"}
    assert fused[0]["eager_ns"] > 0 and fused[0]["compiled_ns"] > 0


def test_compare_compile_needs_a_model():
    r = run("profile", "--compare-compile")
    assert r.exit_code == 2 and "--compare-compile goes with --model" in r.output


# -- bad input: one line on stderr, exit 2 ----------------------------------------------------------


def test_script_that_raises_keeps_partial_trace(tmp_path):
    (tmp_path / "boom.py").write_text(
        "import torch\na, b = torch.randn(64, 128), torch.randn(128, 32)\n"
        "for _ in range(2):\n    c = a @ b\nraise ValueError('bad batch 7')\n"
    )
    r = perf("profile", "boom.py", cwd=tmp_path)
    assert r.returncode == 2
    line = one_line_error(r.stderr)
    assert line.startswith("perf: boom.py: ValueError: bad batch 7 (line 5)")
    assert line.endswith("partial trace written to perf-boom.json.gz")
    assert (load_trace(tmp_path / "perf-boom.json.gz").events["name"] == "aten::mm").sum() == 2


def test_compile_failure_is_one_line(tmp_path):
    # A custom op with no fake (meta) implementation: eager runs, Dynamo cannot trace it.
    (tmp_path / "opaque.py").write_text(
        "import torch\n"
        "@torch.library.custom_op('perftest::opaque', mutates_args=())\n"
        "def opaque(x: torch.Tensor) -> torch.Tensor:\n    return x * 2\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.lin = torch.nn.Linear(8, 8)\n"
        "    def forward(self, x):\n        return opaque(self.lin(x))\n"
        "def build():\n    return M()\n"
    )
    r = perf("profile", "--model", "opaque.py:build", "--input", "2x8", "--compile", cwd=tmp_path)
    assert r.returncode == 2
    line = one_line_error(r.stderr)
    assert "torch.compile failed in warm-up step 1 of 1" in line and "no fake impl" in line, line
    assert "no trace written; rerun without --compile" in line
    assert not (tmp_path / "perf-build.json.gz").exists()


@pytest.fixture
def factories(tmp_path: Path) -> Path:
    (tmp_path / "factories.py").write_text(
        "import torch\nNUMBER = 3\n"
        "def raises():\n    raise ValueError('no weights here')\n"
        "def not_a_module():\n    return 3\n"
        "def wrong_width():\n    return torch.nn.Linear(4, 4)\n"
    )
    return tmp_path / "factories.py"


@pytest.mark.parametrize(
    "spec, says",
    [
        ("no_such_pkg_q7.models:mlp", "no module named 'no_such_pkg_q7'"),
        ("examples.models:no_such_factory", "examples.models has no attribute 'no_such_factory'"),
        ("examples.models", "expected MODULE:FACTORY"),
        ("{f}:NUMBER", "NUMBER is a int, not a callable"),
        ("{f}:raises", "the factory raised ValueError: no weights here"),
        ("{f}:not_a_module", "returned a int, not a torch.nn.Module"),
        (
            "{f}:wrong_width",
            "the model raised in warm-up step 1 of 1: RuntimeError: mat1 and mat2 shapes cannot be multiplied",
        ),
        ("{dir}/missing.py:build", "no such file"),
    ],
)
def test_bad_model_spec(factories, spec, says):
    r = run(
        "profile",
        "--model",
        spec.format(f=factories, dir=factories.parent),
        "--input",
        "2x8",
        "-o",
        factories.parent / "t.json.gz",
    )
    assert r.exit_code == 2, r.output
    assert says in one_line_error(r.stderr)


@pytest.mark.parametrize(
    "shape, says",
    [
        ("32by256", "a shape is up to 8 positive integers joined by 'x'"),
        ("0x256", "positive integers"),
        ("1x128:int65", "--input 1x128:int65: dtype int65: expected one of"),
        ("32x256:fp32:9", "an upper bound applies to integer inputs only"),
        ("1x2:int64:1:2", "expected SHAPE[:DTYPE[:HIGH]]"),
    ],
)
def test_bad_input_shape(tmp_path, shape, says):
    r = run("profile", "--model", "examples.models:mlp", "--input", shape, "-o", tmp_path / "t.json.gz")
    assert r.exit_code == 2, r.output
    assert says in one_line_error(r.stderr)


@pytest.mark.parametrize(
    "args, says",
    [
        (["missing_script.py"], "missing_script.py: no such script"),
        (["--model", "examples.models:mlp"], "give the model's inputs with --input"),
        (["--model", "examples.models:mlp", "--input", "2x256", "--dtype", "fp8"], "--dtype fp8: expected one of fp32"),
        ([], "give a script to run or --model"),
        (["--model", "examples.models:mlp", "--input", "2x256", "--bogus"], "no such option: --bogus"),
        (["-o", "no/such/dir/t.json.gz", "{script}"], "the output directory does not exist"),
        (["--active", "2", "{script}", "0"], "no trace recorded: the run ended after 0 step() mark(s)"),
        (["--compile", "{script}"], "go with --model"),
    ],
)
def test_bad_invocation(tmp_path, args, says):
    script = tmp_path / "matmuls.py"
    script.write_text(MATMULS)
    r = run("profile", *[a.format(script=script) for a in args])
    assert r.exit_code == 2, r.output
    assert says in one_line_error(r.stderr)


def test_script_exit_status(tmp_path):
    (tmp_path / "ok.py").write_text("import sys\nsys.exit(0)\n")
    (tmp_path / "fails.py").write_text("import sys\nsys.exit(3)\n")
    assert run("profile", "-o", tmp_path / "ok.json.gz", tmp_path / "ok.py").exit_code == 0
    r = run("profile", "-o", tmp_path / "f.json.gz", tmp_path / "fails.py")
    assert r.exit_code == 2 and "exited with status 3; partial trace written to" in one_line_error(r.stderr)
