"""The import rules of docs/architecture.md ("Floors and what each may import"), and torch kept
out of `perf analyze`.

    model       profiler/model/              imports nothing of ours
    collectors  collectors/                  the model (and collectors)
    analysis    analysis/                    the model (and analysis)
    accelerator accelerator/                 the model (and accelerator); analysis must not
                                             import it (collectors may read its logs later)
    facade      profiler/api/                anything below it
    autotune    profiler/autotune/           the model, the facade, analysis and accelerator (and
                                             autotune); the CLI imports it, nothing below does
    top         the rest of profiler/: cli,  the facade, the model and the top floor's own
                render*, report, calibrate,  modules
                docs
    dashboard   dashboard/                   the facade, the model and dashboard
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = {"profiler", "collectors", "analysis", "dashboard", "accelerator"}
MODEL = {"profiler.model"}
API = {"profiler.api"}
#: `perf dashboard` starts the app: the CLI's one import of its sibling on the top floor.
DASHBOARD_ENTRY = {"dashboard.app"}
#: The autotune loop (issue 14) drives the compiler and the simulator and reads the analysis of
#: their traces: it sits above the facade and the middle floor, below the CLI.
AUTOTUNE = MODEL | API | {"analysis", "accelerator", "profiler.autotune"}
# What each floor may import of ours.
ALLOWED = {
    "analysis": MODEL | {"analysis"},
    "accelerator": MODEL | {"accelerator"},
    "collectors": MODEL | {"collectors"},
    "dashboard": MODEL | API | {"dashboard"},
}


def imports(path: Path) -> set[str]:
    """Modules of ours that `path` imports anywhere (top level or inside functions)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in out if m.split(".")[0] in OURS}


def allowed(module: str, rules: set[str]) -> bool:
    return any(module == r or module.startswith(r + ".") for r in rules)


def forbidden(path: Path, rules: set[str]) -> list[str]:
    """The modules of ours `path` imports that `rules` do not allow."""
    out = []
    for m in sorted(imports(path)):
        # `from profiler.model.schema import Kind` is recorded as profiler.model.schema and
        # profiler.model.schema.Kind; `from profiler import __version__` as profiler and profiler.__version__
        parent = m.rsplit(".", 1)[0]
        if (
            m in ("profiler", "profiler.__version__")
            or allowed(m, rules)
            or (parent != "profiler" and allowed(parent, rules))
        ):
            continue
        out.append(m)
    return out


def violations(paths: list[Path], rules: set[str]) -> list[str]:
    return [f"{p.relative_to(ROOT)} imports {m}" for p in paths for m in forbidden(p, rules)]


@pytest.mark.parametrize("floor", sorted(ALLOWED))
def test_floor_imports(floor):
    bad = violations(sorted((ROOT / floor).rglob("*.py")), ALLOWED[floor])
    assert not bad, "\n".join(bad)


def test_model_imports_nothing_of_ours():
    bad = violations(sorted((ROOT / "profiler" / "model").rglob("*.py")), MODEL)
    assert not bad, "\n".join(bad)


def test_cli_and_output_call_the_facade_only():
    """The top floor (profiler/ outside the model and the facade: the CLI, its renderers and
    report, calibrate, the docs generator) imports the facade, the model and its own modules."""
    top = [
        p
        for p in sorted((ROOT / "profiler").rglob("*.py"))
        if not {"model", "api", "autotune"} & set(p.relative_to(ROOT / "profiler").parts)
        and p.relative_to(ROOT / "profiler").as_posix() not in ("__init__.py", "__main__.py")
    ]
    assert any(p.parent.name == "cli" or p.name == "cli.py" for p in top)
    bad = violations(top, {"profiler"} | DASHBOARD_ENTRY)
    assert not bad, "\n".join(bad)


def test_autotune_imports_its_floor_only():
    """profiler/autotune imports the model, the facade, analysis and accelerator; the floors
    below it and the facade never import it (the CLI does)."""
    paths = sorted((ROOT / "profiler" / "autotune").rglob("*.py"))
    assert paths
    bad = violations(paths, AUTOTUNE)
    assert not bad, "\n".join(bad)
    below = [
        p
        for floor in ("analysis", "accelerator", "collectors", "dashboard", "profiler/api", "profiler/model")
        for p in sorted((ROOT / floor).rglob("*.py"))
    ]
    bad = [f"{p.relative_to(ROOT)} imports {m}" for p in below for m in imports(p) if m.startswith("profiler.autotune")]
    assert not bad, "\n".join(bad)


def test_package_init_imports_only_the_model():
    tree = ast.parse((ROOT / "profiler" / "__init__.py").read_text())
    top_level = {
        n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] in OURS
    }
    assert all(allowed(m, MODEL) for m in top_level), top_level


def test_the_rules_catch_what_they_forbid(tmp_path):
    """Each rule of the issue fails on a file that breaks it: the model importing anything of
    ours, analysis importing collectors, the dashboard or the CLI, collectors importing analysis,
    and the dashboard or the CLI reaching past the facade."""
    cases = [
        ("from profiler.api import analyze", MODEL),
        ("import analysis.units", MODEL),
        ("from collectors.kineto import load_kineto", ALLOWED["analysis"]),
        ("from dashboard.app import build_app", ALLOWED["analysis"]),
        ("from profiler.cli import main", ALLOWED["analysis"]),
        ("from analysis.cost import op_cost", ALLOWED["collectors"]),
        ("from accelerator.hardware import load_accel", ALLOWED["analysis"]),
        ("from analysis.roofline import classify", ALLOWED["accelerator"]),
        ("from collectors.kineto import load_kineto", ALLOWED["accelerator"]),
        ("from analysis.roofline import classify", ALLOWED["dashboard"]),
        ("from collectors.perfetto import write_perfetto", {"profiler"} | DASHBOARD_ENTRY),
        ("from collectors.kineto import load_kineto", AUTOTUNE),
        ("from profiler.cli import main", AUTOTUNE),
        ("from profiler.render.text import render_short", AUTOTUNE),
        ("from dashboard.app import build_app", AUTOTUNE),
    ]
    for i, (line, rules) in enumerate(cases):
        f = tmp_path / f"case{i}.py"
        f.write_text(f"def f():\n    {line}\n")
        assert forbidden(f, rules), line
    ok = tmp_path / "ok.py"
    ok.write_text("from profiler.model.schema import Kind\nfrom profiler.api import llm_phases\n")
    assert not forbidden(ok, ALLOWED["dashboard"])


def test_facade_names_resolve():
    """Every name the facade lends the CLI and dashboard (profiler.api.FACADE) exists at its home."""
    import importlib

    from profiler import api

    torchless = {k: v for k, v in api.FACADE.items() if not v[0].startswith("collectors.torch_runtime")}
    for name, (module, attr) in torchless.items():
        assert getattr(importlib.import_module(module), attr) is getattr(api, name), name


def test_analyze_does_not_import_torch(tmp_path):
    trace = ROOT / "examples" / "traces" / "mlp_cpu.json.gz"
    code = (
        "import sys\nfrom profiler.cli import main\n"
        f"main(['analyze', {str(trace)!r}, '--json'])\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "assert 'dash' not in sys.modules and 'plotly' not in sys.modules\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
