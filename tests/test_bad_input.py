"""Bad input through `perf analyze`: unreadable files fail with one line, odd events are counted.

Every broken input is derived in tmp_path from a real trace (never written into tests/data/):
- unreadable input: exit 2, stderr exactly one line `perf: <path>: <problem>`, stdout empty;
- event-level problems: exit 0, the other events analyzed, the problem counted exactly, in the
  JSON `problems` and in the text report's "Problems met while reading".
The input file is never modified by a run.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler.cli import app
from tests.conftest import TRACES

SEED = TRACES / "sglang_qwen3_decode_mi300x" / "sglang_Qwen3-8B_decode.json.gz"
DLRM = TRACES / "dlrm_8rank_v100"
DLRM0 = DLRM / "worker0_step_12.1694128201545.pt.trace.json.gz"
DLRM1 = DLRM / "worker1_step_12.1694128201556.pt.trace.json.gz"
REPO = Path(__file__).resolve().parents[1]

runner = CliRunner()
WIDE = {"COLUMNS": "400"}  # rich truncates long cells to the terminal width; keep lines whole


@functools.cache
def seed_json() -> bytes:
    return gzip.decompress(SEED.read_bytes())


def seed_doc() -> dict:
    """A fresh copy of the seed trace as Python objects."""
    return json.loads(seed_json())


@functools.cache
def seed_x_count() -> int:
    return sum(1 for e in seed_doc()["traceEvents"] if e.get("ph") == "X")


@functools.cache
def baseline_problems() -> dict[str, int]:
    """What the unmodified seed reports (a few host events poke out of their parents)."""
    r = runner.invoke(app, ["analyze", str(SEED), "--json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)["problems"]


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_one_line_error(stderr: str, stdout: str, named: Path, words: tuple[str, ...]) -> str:
    assert stdout == "", f"stdout should be empty, got {stdout[:300]!r}"
    lines = stderr.splitlines()
    assert len(lines) == 1, f"want exactly one line on stderr, got {stderr!r}"
    line = lines[0]
    assert line.startswith("perf: "), line
    assert "Traceback" not in stderr and "internal error" not in line, line
    assert str(named) in line, f"{named} not named in {line!r}"
    problem = line.split(f"{named}", 1)[1].lower()
    for w in words:
        assert w.lower() in problem, f"{w!r} not in {line!r}"
    return line


# --------------------------------------------------------------------------------------------
# Unreadable input: exit 2, one line.
# Each builder writes into tmp_path and returns (path to analyze, path the message names, words).
# --------------------------------------------------------------------------------------------

Case = Callable[[Path], tuple[Path, Path, tuple[str, ...]]]


def _write(p: Path, data: bytes) -> Path:
    p.write_bytes(data)
    return p


def truncated_plain(tmp: Path):
    data = seed_json()
    p = _write(tmp / "cut.json", data[: len(data) // 2])
    return p, p, ("truncated",)


def truncated_gzip(tmp: Path):
    data = SEED.read_bytes()
    p = _write(tmp / "cut.json.gz", data[: len(data) * 2 // 3])
    return p, p, ("gzip", "ended before")


def corrupt_gzip(tmp: Path):
    head = gzip.compress(b"{}")[:10]  # a valid gzip header (magic, method, flags, mtime, os)
    garbage = bytes((i * 7919 + 13) % 256 for i in range(20_000))
    p = _write(tmp / "garbage.json.gz", head + garbage)
    return p, p, ("corrupt gzip",)


def gzip_named_json(tmp: Path):
    """gzip is found by its magic bytes, not by the name: a corrupt one named .json still says gzip."""
    data = SEED.read_bytes()
    p = _write(tmp / "looks_plain.json", data[:5000])
    return p, p, ("gzip",)


def json_list(tmp: Path):
    p = _write(tmp / "list.json", json.dumps(seed_doc()["traceEvents"][:50]).encode())
    return p, p, ("not a trace", "not an object")


def no_trace_events(tmp: Path):
    doc = seed_doc()
    doc["events"] = doc.pop("traceEvents")
    p = _write(tmp / "noevents.json", json.dumps(doc).encode())
    return p, p, ("not a trace", "traceevents")


def events_not_list(value):
    def case(tmp: Path):
        doc = seed_doc()
        doc["traceEvents"] = value
        p = _write(tmp / "notlist.json", json.dumps(doc).encode())
        return p, p, ("traceevents", "not a list")

    return case


def empty_events(tmp: Path):
    doc = seed_doc()
    doc["traceEvents"] = []
    p = _write(tmp / "empty_events.json.gz", gzip.compress(json.dumps(doc).encode()))
    return p, p, ("empty trace", "no events")


def events_all_unreadable(tmp: Path):
    """A list of things that are not events: say what was skipped, not that there were none."""
    doc = {"traceEvents": [1, "two", [3], None]}
    p = _write(tmp / "junk_items.json", json.dumps(doc).encode())
    return p, p, ("no readable events", "malformed")


def only_metadata_events(tmp: Path):
    doc = seed_doc()
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("ph") != "X"]
    p = _write(tmp / "no_x.json", json.dumps(doc).encode())
    return p, p, ("no readable events", "no complete ('x') events")


def every_x_lacks_dur(tmp: Path):
    doc = seed_doc()
    for e in doc["traceEvents"]:
        if e.get("ph") == "X":
            del e["dur"]
    p = _write(tmp / "nodur.json", json.dumps(doc).encode())
    return p, p, ("no readable events", f"{seed_x_count()} events skipped: missing dur")


def zero_bytes(tmp: Path):
    p = _write(tmp / "zero.json", b"")
    return p, p, ("empty file", "0 bytes")


def not_json(tmp: Path):
    p = _write(tmp / "notes.json", b"this is a text file, not a trace\n")
    return p, p, ("not valid json",)


def missing_path(tmp: Path):
    p = tmp / "nowhere" / "trace.json"
    return p, p, ("no such file",)


def dir_without_traces(tmp: Path):
    d = tmp / "run1"
    d.mkdir()
    (d / "README.txt").write_text("no traces here\n")
    (d / "trace.json.tmp").write_bytes(seed_json()[:100])
    return d, d, ("no trace files",)


def two_files_same_rank(tmp: Path):
    d = tmp / "ranks"
    d.mkdir()
    shutil.copy(DLRM0, d / "rank_a.pt.trace.json.gz")
    shutil.copy(DLRM0, d / "rank_b.pt.trace.json.gz")
    return d, d, ("rank 0", "rank_a.pt.trace.json.gz")


def dir_with_one_truncated_file(tmp: Path):
    """In a directory, the message names the bad file, not only the directory."""
    d = tmp / "mixed"
    d.mkdir()
    shutil.copy(DLRM0, d / "w0.json.gz")
    data = DLRM1.read_bytes()
    _write(d / "w1.json.gz", data[: len(data) // 2])
    return d, d / "w1.json.gz", ("gzip",)


def dir_rank_missing_in_one_file(tmp: Path):
    d = tmp / "partial"
    d.mkdir()
    shutil.copy(DLRM0, d / "w0.json.gz")
    doc = json.loads(gzip.decompress(DLRM1.read_bytes()))
    del doc["distributedInfo"]
    _write(d / "w1.json", json.dumps(doc).encode())
    return d, d / "w1.json", ("distributedinfo.rank",)


FATAL: dict[str, Case] = {
    "truncated-plain": truncated_plain,
    "truncated-gzip": truncated_gzip,
    "corrupt-gzip": corrupt_gzip,
    "gzip-named-json": gzip_named_json,
    "json-list": json_list,
    "object-without-traceEvents": no_trace_events,
    "traceEvents-object": events_not_list({"0": {"ph": "X"}}),
    "traceEvents-number": events_not_list(7),
    "traceEvents-string": events_not_list("[]"),
    "traceEvents-null": events_not_list(None),
    "empty-traceEvents": empty_events,
    "traceEvents-of-non-events": events_all_unreadable,
    "only-metadata-events": only_metadata_events,
    "every-event-lacks-dur": every_x_lacks_dur,
    "zero-bytes": zero_bytes,
    "not-json": not_json,
    "missing-path": missing_path,
    "directory-without-traces": dir_without_traces,
    "two-files-same-rank": two_files_same_rank,
    "directory-one-truncated": dir_with_one_truncated_file,
    "directory-rank-missing": dir_rank_missing_in_one_file,
}


def _hashes(root: Path) -> dict[Path, str]:
    return {p: sha(p) for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("case", FATAL.values(), ids=FATAL.keys())
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_unreadable_input_one_line_exit_2(tmp_path: Path, case: Case, as_json: bool):
    path, named, words = case(tmp_path)
    before = _hashes(tmp_path)
    r = runner.invoke(app, ["analyze", str(path)] + (["--json"] if as_json else []))
    assert r.exit_code == 2, (r.exit_code, r.output, r.exception)
    assert_one_line_error(r.stderr, r.stdout, named, words)
    assert _hashes(tmp_path) == before, "the input (or its directory) was modified"


def test_two_files_same_rank_names_both(tmp_path: Path):
    path, _, _ = two_files_same_rank(tmp_path)
    r = runner.invoke(app, ["analyze", str(path)])
    line = assert_one_line_error(r.stderr, r.stdout, path, ("claims rank 0",))
    assert "rank_a.pt.trace.json.gz" in line and "rank_b.pt.trace.json.gz" in line


SUBPROCESS_CASES = ["truncated-gzip", "two-files-same-rank", "traceEvents-of-non-events", "missing-path"]


@pytest.mark.parametrize("name", SUBPROCESS_CASES)
def test_unreadable_input_in_a_real_process(tmp_path: Path, name: str):
    """No traceback reaches the terminal: a real `python -m profiler analyze`."""
    path, named, words = FATAL[name](tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PERF_DEBUG"}
    p = subprocess.run(
        [sys.executable, "-m", "profiler", "analyze", str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=60,
    )
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    assert_one_line_error(p.stderr, p.stdout, named, words)


def test_unknown_rank_is_one_line(tmp_path: Path):
    r = runner.invoke(app, ["analyze", str(SEED), "--rank", "5"])
    assert r.exit_code == 2 and r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("perf: ") and "--rank 5" in r.stderr


# --------------------------------------------------------------------------------------------
# Recoverable event-level problems: exit 0, the rest analyzed, the problem counted exactly.
# --------------------------------------------------------------------------------------------


def kernel_indexes(doc: dict, k: int = 3) -> list[int]:
    """k kernel events spread over the trace (first, middle, last...)."""
    idx = [i for i, e in enumerate(doc["traceEvents"]) if e.get("ph") == "X" and e.get("cat") == "kernel"]
    step = max(1, len(idx) // k)
    return idx[::step][:k]


def _break(mutate: Callable[[dict], None], k: int = 3) -> Callable[[Path], Path]:
    def build(tmp: Path) -> Path:
        doc = seed_doc()
        for i in kernel_indexes(doc, k):
            mutate(doc["traceEvents"][i])
        return _write(tmp / "odd.json", json.dumps(doc).encode())  # NaN/Infinity as Python writes them

    return build


def invalid_utf8_names(tmp: Path) -> Path:
    doc = seed_doc()
    for i in kernel_indexes(doc):
        doc["traceEvents"][i]["name"] = "@@BAD@@" + doc["traceEvents"][i]["name"]
    data = json.dumps(doc).encode().replace(b"@@BAD@@", b"k\xff")  # one invalid byte per name
    assert data.count(b"\xff") == 3
    return _write(tmp / "utf8.json", data)


SKIPPED_TIME = "events skipped: ts or dur is not a finite number"

# name: (build, reason (None: any reason mentioning UTF-8), count, change in analyzed events)
RECOVERABLE = {
    "missing-ts": (_break(lambda e: e.pop("ts")), "events skipped: missing ts", 3, -3),
    "missing-dur": (_break(lambda e: e.pop("dur")), "events skipped: missing dur", 3, -3),
    "null-dur": (_break(lambda e: e.__setitem__("dur", None)), "events skipped: missing dur", 3, -3),
    "negative-dur": (_break(lambda e: e.__setitem__("dur", -2.5)), "events skipped: negative dur", 3, -3),
    "nan-dur": (_break(lambda e: e.__setitem__("dur", float("nan"))), SKIPPED_TIME, 3, -3),
    "infinite-dur": (_break(lambda e: e.__setitem__("dur", float("inf"))), SKIPPED_TIME, 3, -3),
    "nan-ts": (_break(lambda e: e.__setitem__("ts", float("-inf"))), SKIPPED_TIME, 3, -3),
    "string-dur": (_break(lambda e: e.__setitem__("dur", "fast")), SKIPPED_TIME, 3, -3),
    "unknown-category": (
        _break(lambda e: e.__setitem__("cat", "npu_kernel_v9")),
        "events of unknown category 'npu_kernel_v9' kept as kind 'other'",
        3,
        0,
    ),
    "invalid-utf8-name": (invalid_utf8_names, None, 3, 0),
}


def _analyze_both(path: Path) -> tuple[dict, str]:
    rj = runner.invoke(app, ["analyze", str(path), "--json"], env=WIDE)
    assert rj.exit_code == 0, (rj.output, rj.exception)
    assert rj.stderr == ""
    rt = runner.invoke(app, ["analyze", str(path)], env=WIDE)
    assert rt.exit_code == 0, (rt.output, rt.exception)
    assert rt.stderr == ""
    return json.loads(rj.stdout), rt.stdout


@pytest.mark.parametrize("name", RECOVERABLE)
def test_recoverable_event_problems_are_counted(tmp_path: Path, name: str):
    build, reason, count, delta = RECOVERABLE[name]
    path = build(tmp_path)
    if name.startswith(("nan", "infinite")):
        assert b"NaN" in path.read_bytes() or b"Infinity" in path.read_bytes()
    before = sha(path)
    doc, text = _analyze_both(path)
    assert sha(path) == before, "the input file was modified"

    problems = doc["problems"]
    new = {k: v for k, v in problems.items() if k not in baseline_problems()}
    if reason is None:
        assert len(new) == 1 and "UTF-8" in next(iter(new)), problems
        reason = next(iter(new))
    assert new == {reason: count}, problems
    assert {k: v for k, v in problems.items() if k in baseline_problems()} == baseline_problems()

    # the other events are analyzed
    assert sum(doc["trace"]["events_by_kind"].values()) == seed_x_count() + delta
    assert doc["summary"]["busy_ns"]["rank0/gpu9"] > 0
    assert any(o["kind"] == "kernel" for o in doc["ops"]) and any(o["kind"] == "op" for o in doc["ops"])

    # and the text report says so
    assert "Problems met while reading" in text
    for k, v in problems.items():
        assert f"{v} {k}" in text, f"{v} {k!r} not in the text report"


def test_several_problems_in_one_file_are_counted_separately(tmp_path: Path):
    doc = seed_doc()
    xs = [i for i, e in enumerate(doc["traceEvents"]) if e.get("ph") == "X" and e.get("cat") == "python_function"]
    ev = doc["traceEvents"]
    for i in xs[0:2]:
        del ev[i]["ts"]
    for i in xs[2:5]:
        del ev[i]["dur"]
    for i in xs[5:9]:
        ev[i]["dur"] = -1
    for i in xs[9:14]:
        ev[i]["dur"] = float("nan")
    for i in xs[14:20]:
        ev[i]["ts"] = "yesterday"
    for i in xs[20:27]:
        ev[i]["cat"] = "mystery"
    del ev[xs[27]]["ts"], ev[xs[27]]["dur"]  # both missing: counted once, as missing ts
    path = _write(tmp_path / "many.json", json.dumps(doc).encode())
    doc_out, text = _analyze_both(path)
    p = doc_out["problems"]
    assert p["events skipped: missing ts"] == 3
    assert p["events skipped: missing dur"] == 3
    assert p["events skipped: negative dur"] == 4
    assert p[SKIPPED_TIME] == 5 + 6
    assert p["events of unknown category 'mystery' kept as kind 'other'"] == 7
    skipped = 3 + 3 + 4 + 11
    assert sum(doc_out["trace"]["events_by_kind"].values()) == seed_x_count() - skipped
    assert doc_out["trace"]["events_by_kind"]["other"] == 7
    for k, v in p.items():
        assert f"{v} {k}" in text


def test_markup_like_names_and_categories_are_shown_literally(tmp_path: Path):
    """Trace strings with square brackets are text, not Rich markup: no crash, nothing eaten."""
    doc = seed_doc()
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    top = max({e["name"] for e in kernels}, key=lambda n: sum(e["dur"] for e in kernels if e["name"] == n))
    for e in kernels:
        if e["name"] == top:
            e["name"] = "gemm[/] [bold]tile[/bold] [with T = float] :fire:"
    for e in kernels[:2]:
        e["cat"] = "[/]"
    path = _write(tmp_path / "brackets.json", json.dumps(doc).encode())
    before = sha(path)
    doc_out, text = _analyze_both(path)
    assert sha(path) == before
    assert doc_out["problems"]["events of unknown category '[/]' kept as kind 'other'"] == 2
    assert "2 events of unknown category '[/]' kept as kind 'other'" in text
    assert "gemm[/] [bold]tile[/bold] [with T = float] :fire:" in text  # nor an emoji code


def test_markup_category_in_a_real_process(tmp_path: Path):
    doc = seed_doc()
    doc["traceEvents"][kernel_indexes(doc, 1)[0]]["cat"] = "[/oops]"
    path = _write(tmp_path / "markup.json", json.dumps(doc).encode())
    p = subprocess.run(
        [sys.executable, "-m", "profiler", "analyze", str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **WIDE},
        timeout=60,
    )
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and p.stderr == ""
    assert "1 events of unknown category '[/oops]' kept as kind 'other'" in p.stdout


def test_nan_inside_an_array_is_not_fatal(tmp_path: Path):
    """Python's json writes NaN/Infinity inside arrays too: the file stays readable."""
    doc = seed_doc()
    for i in kernel_indexes(doc):
        doc["traceEvents"][i].setdefault("args", {})["Concrete Inputs"] = [float("nan"), 1.5, float("-inf")]
    path = _write(tmp_path / "nan_list.json", json.dumps(doc).encode())
    assert b"[NaN, 1.5, -Infinity]" in path.read_bytes()
    doc_out, text = _analyze_both(path)
    assert sum(doc_out["trace"]["events_by_kind"].values()) == seed_x_count()
    assert doc_out["problems"] == baseline_problems()
