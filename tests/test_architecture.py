"""The import rules of docs/architecture.md, and torch kept out of `perf analyze`."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = {"profiler", "collectors", "analysis", "dashboard", "accelerator"}
MODEL = {"profiler.model"}
# What each layer may import of ours (DESIGN.md, "Top-level folders").
ALLOWED = {
    "analysis": MODEL | {"analysis"},
    "collectors": MODEL | {"collectors", "accelerator"},
    "accelerator": {"accelerator"},
    "dashboard": {"profiler", "analysis", "dashboard"},
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
    return any(module == r or module.startswith(r + ".") for r in rules) or module.split(".")[0] in {
        r for r in rules if "." not in r
    }


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports(layer):
    bad = []
    for path in (ROOT / layer).rglob("*.py"):
        for m in imports(path):
            # `from profiler.model.schema import Kind` is recorded as profiler.model.schema and profiler.model.schema.Kind
            if not allowed(m, ALLOWED[layer]) and not allowed(m.rsplit(".", 1)[0], ALLOWED[layer]):
                bad.append(f"{path.relative_to(ROOT)} imports {m}")
    assert not bad, "\n".join(bad)


def test_model_modules_import_only_the_model():
    for path in (ROOT / "profiler" / "model").rglob("*.py"):
        extra = {m for m in imports(path) if not allowed(m, MODEL)}
        assert not extra, f"{path.relative_to(ROOT)} imports {extra}"


def test_package_init_imports_only_the_model():
    tree = ast.parse((ROOT / "profiler" / "__init__.py").read_text())
    top_level = {n.module for n in tree.body if isinstance(n, ast.ImportFrom) and n.module and n.module.split(".")[0] in OURS}
    assert all(allowed(m, MODEL) for m in top_level), top_level


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
