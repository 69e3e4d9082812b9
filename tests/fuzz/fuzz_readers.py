"""Coverage-guided fuzz target (atheris, i.e. libFuzzer) for the readers of the user's files:
Kineto JSON (collectors.kineto), Perfetto protobuf (collectors.perfetto) and torch.compile's
TORCH_TRACE structured log (collectors.torch_compile, through the whole compile report).

The first byte of an input picks the reader (mod 3: 0 Kineto, 1 Perfetto, 2 TORCH_TRACE), the
rest is the file. The property: the reader returns, or raises InputError (the one-line error
the CLI prints, exit 2); any other exception is a crash.

    python tests/fuzz/fuzz_readers.py tests/fuzz/seeds -max_total_time=30   # stop at the first crash
    PERF_FUZZ_COUNT=counts.json python tests/fuzz/fuzz_readers.py -runs=1000000 corpus/
        # count the other exceptions by type and place instead of stopping (benchmarks/bench_fuzz.py)

tests/test_fuzz_atheris.py runs it in CI for a bounded number of executions; the seeds are
slices of real files (tests/fuzz/make_seeds.py).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path

import atheris

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

with atheris.instrument_imports(include=["collectors", "profiler"]):
    from collectors.kineto import load_kineto
    from collectors.perfetto import load_perfetto
    from collectors.torch_compile.report import read_compile_report
    from profiler.model.errors import InputError

READERS = ((load_kineto, "t.json"), (load_perfetto, "t.pftrace"), (read_compile_report, "t.log"))
_DIR = Path(tempfile.mkdtemp(prefix="perf-fuzz-"))
COUNT_FILE = os.environ.get("PERF_FUZZ_COUNT")
counts: Counter[str] = Counter()
runs = 0


def read(data: bytes) -> None:
    """One input through its reader; InputError is a correct answer."""
    if not data:
        return
    reader, name = READERS[data[0] % len(READERS)]
    path = _DIR / name
    path.write_bytes(data[1:])
    try:
        reader(path)
    except InputError as e:
        assert "\n" not in e.problem, f"an InputError of several lines: {e.problem!r}"


def place(e: BaseException) -> str:
    """'TypeError at collectors/kineto/build.py:88 (build_events)': the innermost frame of ours."""
    frames = [
        f for f in traceback.extract_tb(e.__traceback__) if str(ROOT) in f.filename and "/fuzz/" not in f.filename
    ]
    f = frames[-1] if frames else traceback.extract_tb(e.__traceback__)[-1]
    return f"{type(e).__name__} at {os.path.relpath(f.filename, ROOT)}:{f.lineno} ({f.name})"


def test_one_input(data: bytes) -> None:
    global runs
    runs += 1
    if not COUNT_FILE:
        read(data)
        return
    try:
        read(data)
    except Exception as e:  # noqa: BLE001 - counted, the run goes on
        counts[place(e)] += 1
        _save()
    if runs % 2000 == 0:
        _save()


def _save() -> None:
    Path(COUNT_FILE).write_text(
        json.dumps({"executions": runs, "errors": sum(counts.values()), "by_place": counts}, indent=1)
    )


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
