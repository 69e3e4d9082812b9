#!/usr/bin/env bash
# CI: the lean install. `pip install .` into a fresh venv (no extras, so no torch) gives a working
# `perf analyze`; `perf profile` says in one line what it needs. Run from any directory; the venv
# lives in a temporary folder removed on exit, and the commands run outside the checkout so only
# the installed package is imported.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3.11}"
command -v "$PYTHON" >/dev/null || PYTHON=python3
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

"$PYTHON" -m venv "$TMP/venv"
BIN="$TMP/venv/bin"
# a copy of the tree without the in-tree venvs: pip's in-tree build must not see .venv or HTA's
tar -C "$REPO" --exclude=./.git --exclude=./.venv --exclude=./benchmarks/.venv-hta --exclude=./benchmarks/data \
    --exclude=./build --exclude='*.egg-info' -cf - . | { mkdir "$TMP/src" && tar -C "$TMP/src" -xf -; }
"$BIN/python" -m pip install --quiet "$TMP/src" 2>&1 | { grep -v "is ignored: it is neither a file nor a directory" || true; }

cd "$TMP"
fail() { echo "lean install: $*" >&2; exit 1; }
"$BIN/python" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is not None)' \
    || fail "torch got installed by 'pip install .'"
"$BIN/perf" --help >/dev/null || fail "perf --help failed"
TRACE="$REPO/tests/data/traces/b200_eager/eager_trace.json.gz"
"$BIN/perf" analyze "$TRACE" >analyze.txt || fail "perf analyze failed"
grep -q . analyze.txt || fail "perf analyze printed nothing"
"$BIN/perf" analyze "$TRACE" --json >analyze.json || fail "perf analyze --json failed"
"$BIN/python" -c 'import json, sys; assert json.load(open(sys.argv[1]))["schema"] == "perf.analyze"' analyze.json \
    || fail "perf analyze --json is not a perf.analyze report"
"$BIN/perf" export "$TRACE" -o trace.pftrace >/dev/null || fail "perf export failed"
"$BIN/python" -c 'import dashboard.app' || fail "the dashboard does not import"
set +e
"$BIN/perf" profile train.py 2>profile.err
rc=$?
set -e
[[ $rc == 2 ]] || fail "perf profile without torch: exit $rc, expected 2"
[[ "$(cat profile.err)" == "perf profile needs torch: pip install 'perf-suite[profile]'" ]] \
    || fail "perf profile without torch said: $(cat profile.err)"
echo "lean install OK: perf analyze, export and the dashboard without torch; perf profile asks for it"
