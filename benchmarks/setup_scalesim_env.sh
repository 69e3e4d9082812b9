#!/usr/bin/env bash
# Create benchmarks/.venv-scalesim with the PyPI `scalesim` package (SCALE-Sim v3), the peer of
# bench_scalesim.py and the source of tests/data/scalesim/. scalesim needs numpy < 2.4, so it lives
# in its own venv and never touches the project's .venv.
# Idempotent: if scalesim already imports there, it does nothing.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/.venv-scalesim"
PY="$VENV/bin/python"
SCALESIM_VERSION="${SCALESIM_VERSION:-3.0.0}"

if [[ -x "$PY" ]] && "$PY" -c 'import scalesim.scale_sim, numpy, sys; sys.exit(tuple(map(int, numpy.__version__.split(".")[:2])) >= (2, 4))' 2>/dev/null; then
    echo "scalesim venv already set up: $VENV"
    exit 0
fi

pip_quiet() {
    # this machine's pip config lists local index folders; drop pip's per-package
    # "Location ... is ignored" noise but keep real errors (pipefail keeps pip's status)
    "$PY" -m pip "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
}

python3 -m venv "$VENV"
pip_quiet install --quiet --upgrade pip
# numpy 2.4 breaks scalesim 3.0.0 (int() of a 1-element array in double_buffered_scratchpad_mem.py:
# "only 0-dimensional arrays can be converted to Python scalars"), and its metadata does not pin it
pip_quiet install --quiet "scalesim==$SCALESIM_VERSION" "numpy<2.4"
"$PY" -c 'import scalesim.scale_sim; from importlib.metadata import version; print("scalesim", version("scalesim"), "import OK")'
