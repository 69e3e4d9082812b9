#!/usr/bin/env bash
# Create benchmarks/.venv-hta with HolisticTraceAnalysis (HTA) + psutil, the
# competitor for bench_ingest.py. HTA lives in its own venv so its pins
# (pandas, jupyterlab, ...) never leak into the project's .venv.
# Idempotent: if HTA already imports there, it does nothing.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/.venv-hta"
PY="$VENV/bin/python"
HTA_VERSION="${HTA_VERSION:-0.5.0}"
# Only used if the resolver would pull torch: pin the local CPU wheel, since an
# open range would download a multi-GB CUDA build.
TORCH_PIN="torch==2.13.0"

if [[ -x "$PY" ]] && "$PY" -c 'import hta, psutil; from hta.trace_analysis import TraceAnalysis' 2>/dev/null; then
    echo "HTA venv already set up: $VENV"
    exit 0
fi

pip_quiet() {
    # this machine's pip config lists local index folders; drop pip's per-package
    # "Location ... is ignored" noise but keep real errors (pipefail keeps pip's status)
    "$PY" -m pip "$@" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }
}

python3 -m venv "$VENV"
pip_quiet install --quiet --upgrade pip

REQS=("HolisticTraceAnalysis==$HTA_VERSION" "psutil")

# Ask the resolver what it would install; if torch is among it, install the
# pinned CPU wheel first so the later install is satisfied by it.
REPORT="$(mktemp)"
trap 'rm -f "$REPORT"' EXIT
pip_quiet install --quiet --dry-run --ignore-installed --report "$REPORT" "${REQS[@]}"
if "$PY" - "$REPORT" <<'PYEOF'
import json, sys
names = {i["metadata"]["name"].lower() for i in json.load(open(sys.argv[1]))["install"]}
sys.exit(0 if "torch" in names else 1)
PYEOF
then
    echo "HTA would pull torch: installing $TORCH_PIN (CPU wheel) first"
    pip_quiet install --quiet "$TORCH_PIN"
fi

pip_quiet install --quiet "${REQS[@]}"
"$PY" -c 'from hta.trace_analysis import TraceAnalysis; import psutil; print("HTA import OK")'
