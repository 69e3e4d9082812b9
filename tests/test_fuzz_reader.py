"""Property tests of the Kineto reader: whatever the bytes, `load_trace` returns a valid `Trace`
or raises `InputError` (one line naming the file); never any other exception.

The seed is a slice of a real trace (the SGLang decode step on MI300X: ops, kernels, runtime
calls, flows, metadata), written to a temporary directory per example.
"""

from __future__ import annotations

import functools
import gzip
import json
import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from profiler import InputError, Trace, load_trace
from tests.conftest import TRACES

SEED = TRACES / "sglang_qwen3_decode_mi300x" / "sglang_Qwen3-8B_decode.json.gz"


def fuzz(max_examples: int) -> settings:
    """Few examples (the whole file stays well under a minute), no deadline: a load takes ~20 ms."""
    return settings(
        max_examples=max_examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


TIME_SKIPS = (
    "events skipped: missing ts",
    "events skipped: missing dur",
    "events skipped: ts or dur is not a finite number",
    "events skipped: negative dur",
)


@functools.cache
def seed_doc_bytes() -> bytes:
    """The real trace cut to its first 400 events (ops, kernels, flows; all its metadata)."""
    doc = json.loads(gzip.decompress(SEED.read_bytes()))
    doc["traceEvents"] = doc["traceEvents"][:400]
    return json.dumps(doc).encode()


@functools.cache
def seed_gzip() -> bytes:
    return gzip.compress(seed_doc_bytes(), mtime=0)


@functools.cache
def seed_x_count() -> int:
    return sum(1 for e in json.loads(seed_doc_bytes())["traceEvents"] if e.get("ph") == "X")


@functools.cache
def value_offsets() -> tuple[int, ...]:
    """Byte offsets of ts/dur/ph/cat/args values in the seed: where mutations do most harm."""
    data = seed_doc_bytes()
    out = []
    for key in (b'"ts": ', b'"dur": ', b'"ph": ', b'"cat": ', b'"args": {', b'"External id": ', b'"correlation": '):
        start = 0
        while (i := data.find(key, start)) != -1:
            out.append(i + len(key))
            start = i + 1
    return tuple(sorted(out))


def load(data: bytes, name: str = "t.json") -> Trace | InputError:
    """load_trace on `data` written to a fresh temporary file; an InputError is returned."""
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / name
        p.write_bytes(data)
        try:
            t = load_trace(p)
        except InputError as e:
            check_input_error(e, p)
            return e
        assert isinstance(t, Trace)
        t.validate()
        check_problem_counts(t)
        return t


def check_input_error(e: InputError, p: Path) -> None:
    assert e.path == str(p), (e.path, p)
    assert isinstance(e.problem, str) and e.problem.strip()
    assert "\n" not in e.problem, f"the CLI prints one line: {e.problem!r}"


def check_problem_counts(t: Trace) -> None:
    assert all(isinstance(k, str) and isinstance(v, int) and v > 0 for k, v in t.problems.counts.items())


def test_seed_reads_cleanly():
    t = load(seed_doc_bytes())
    assert isinstance(t, Trace) and len(t.events) == seed_x_count() > 100
    t = load(seed_gzip(), "t.json.gz")
    assert isinstance(t, Trace) and len(t.events) == seed_x_count()


# ---------------------------------------------------------------------------------------------
# (a) truncation at any byte offset
# ---------------------------------------------------------------------------------------------


@fuzz(60)
@given(data=st.data(), gz=st.booleans())
def test_truncated_anywhere(data, gz: bool):
    whole = seed_gzip() if gz else seed_doc_bytes()
    cut = data.draw(st.one_of(st.integers(0, len(whole) - 1), st.integers(max(0, len(whole) - 40), len(whole) - 1)))
    out = load(whole[:cut], "t.json.gz" if gz else "t.json")
    if gz or whole[:cut].strip() != whole.strip():
        assert isinstance(out, InputError), f"a file cut at byte {cut} of {len(whole)} was read"
        assert any(w in out.problem for w in ("truncated", "gzip", "empty file", "not valid JSON")), out.problem


# ---------------------------------------------------------------------------------------------
# (b) random byte ranges overwritten
# ---------------------------------------------------------------------------------------------

JSONISH = [
    b'"',
    b",",
    b":",
    b"{",
    b"}",
    b"[",
    b"]",
    b"NaN",
    b"-Infinity",
    b"null",
    b"true",
    b"-1",
    b"1e999",
    b"99999999999999999999999",
    b"\xff",
    b"\xc3",
    b"\xe2\x82",
    b'"X"',
    b'"i"',
    b'"abc"',
    b"0.5",
    b" ",
    b"\\",
    b"\\u00",
    b"\x00",
]
patch_bytes = st.one_of(
    st.binary(min_size=1, max_size=12),
    st.sampled_from(JSONISH),
    st.text(alphabet="0123456789-.eE+", min_size=1, max_size=8).map(str.encode),
)


@fuzz(80)
@given(data=st.data(), gz=st.booleans())
def test_overwritten_byte_ranges(data, gz: bool):
    whole = bytearray(seed_doc_bytes())
    n_patches = data.draw(st.integers(1, 4))
    for _ in range(n_patches):
        at = data.draw(st.one_of(st.integers(0, len(whole) - 1), st.sampled_from(value_offsets())))
        patch = data.draw(patch_bytes)
        whole[at : at + len(patch)] = patch  # overwrite (may run past the end: grows the file)
    mutated = bytes(whole)
    out = load(gzip.compress(mutated) if gz else mutated, "t.json.gz" if gz else "t.json")
    if isinstance(out, Trace):
        # an X event needs a literal "X" in the bytes; a repair (U+FFFD) never adds one
        assert len(out.events) <= mutated.count(b'"X"')


@fuzz(25)
@given(data=st.data())
def test_overwritten_gzip_stream(data):
    whole = bytearray(seed_gzip())
    at = data.draw(st.integers(0, len(whole) - 1))
    patch = data.draw(st.binary(min_size=1, max_size=16))
    whole[at : at + len(patch)] = patch
    out = load(bytes(whole), "t.json.gz")
    if isinstance(out, Trace):  # the CRC caught nothing only if the payload survived
        assert len(out.events) <= seed_x_count()


# ---------------------------------------------------------------------------------------------
# (c) random event lists
# ---------------------------------------------------------------------------------------------

INT64 = 2**63


def mostly(good: st.SearchStrategy, odd: st.SearchStrategy, one_in: int = 6) -> st.SearchStrategy:
    """`good` most of the time, `odd` about one draw in `one_in`: events that are mostly readable
    reach the later stages of the reader instead of all being skipped as malformed."""
    return st.integers(0, one_in - 1).flatmap(lambda k: odd if k == 0 else good)


junk_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
)
junk = st.recursive(
    junk_scalar,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)

sane_us = st.integers(0, 5_000)
good_time = st.one_of(
    sane_us,
    st.floats(0, 5_000, allow_nan=False).map(lambda f: round(f, 3)),
    st.decimals(min_value=0, max_value=5_000, places=3, allow_nan=False).map(str),  # ROCm-style text
)
odd_time = st.one_of(
    st.sampled_from(["12.5", "1e3", "-0", "+7", "0x10", "", " 5", "NaN", "1.2.3", "1e400", "-5.5"]),
    st.decimals(min_value=-(10**17), max_value=10**17, places=3, allow_nan=False).map(str),
    st.integers(-(10**6), -1),  # negative
    st.integers(-(2**70), 2**70),  # huge: overflows int64 nanoseconds
    st.sampled_from([2**53, 10**15, 10**16, 2**62, 2**63 - 1, 2**63, 2**64 + 1, -(2**63)]),
    st.floats(allow_nan=True, allow_infinity=True),  # NaN/Infinity literals as Python writes them
    st.none(),
    st.booleans(),
    st.lists(sane_us, max_size=2),
    st.dictionaries(st.text(max_size=3), sane_us, max_size=2),
)
time_value = mostly(good_time, odd_time)

CATEGORIES = [
    "cpu_op",
    "kernel",
    "cuda_runtime",
    "cuda_driver",
    "gpu_memcpy",
    "gpu_memset",
    "user_annotation",
    "gpu_user_annotation",
    "python_function",
    "Trace",
    "Kernel",
    "Runtime",
    "Operator",
    "Memcpy",
    "overhead",
    "ac2g",
    "fwdbwd",
    "async",
    "",
    "npu_op",
    "[/]",
    "mystery",
]
category = mostly(st.sampled_from(CATEGORIES), st.one_of(st.text(max_size=8), junk_scalar))
phase = mostly(
    st.sampled_from(["X"] * 6 + ["i", "s", "f", "M", "B", "E", "C"]),
    st.one_of(st.text(max_size=2), junk_scalar),
)
name = mostly(
    st.one_of(
        st.sampled_from(
            [
                "aten::mm",
                "cudaLaunchKernel",
                "hipGraphLaunch",
                "ProfilerStep#3",
                "ProfilerStep#x",
                "[memory]",
                "process_name",
                "thread_name",
                "gemm [with T = float]",
            ]
        ),
        st.text(max_size=12),
    ),
    junk_scalar,
)
odd_id = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**63 - 1, 2**63, 2**64 - 1, 2**64, -(2**63), -(2**63) - 1]),
    st.sampled_from(["stream 7", "7", "abc", ""]),
    junk_scalar,
)
small_id = mostly(st.integers(-1, 40), odd_id)

KNOWN_ARGS = {
    "External id": small_id,
    "external id": small_id,
    "correlation": small_id,
    "device": small_id,
    "stream": small_id,
    "Input Dims": mostly(st.sampled_from([[[2, 3], []], [[4096, 4096], [4096]], []]), junk),
    "Input type": mostly(st.sampled_from([["float", ""], ["c10::BFloat16"]]), junk),
    "bytes": small_id,
    "Bytes": small_id,
    "Total Allocated": small_id,
    "Total Reserved": small_id,
    "Device Type": small_id,
    "Device Id": small_id,
    "name": mostly(st.text(max_size=6), junk_scalar),
}
args = st.builds(
    lambda known, extra: {**extra, **known},
    st.fixed_dictionaries({}, optional=KNOWN_ARGS),
    mostly(st.just({}), st.dictionaries(st.text(max_size=6), junk, max_size=2), 3),
)
FIELDS = {
    "ph": phase,
    "name": name,
    "cat": category,
    "pid": small_id,
    "tid": small_id,
    "ts": time_value,
    "dur": time_value,
    "id": small_id,
    "args": mostly(args, junk),
}
event = st.builds(
    lambda ev, drop: {k: v for k, v in ev.items() if k not in drop},
    st.fixed_dictionaries(FIELDS),
    mostly(st.just(frozenset()), st.frozensets(st.sampled_from(sorted(FIELDS)), min_size=1, max_size=3)),
)
item = mostly(event, junk, 12)
top_level = st.fixed_dictionaries(
    {},
    optional={
        "schemaVersion": junk_scalar,
        "distributedInfo": st.one_of(
            st.fixed_dictionaries({}, optional={"rank": small_id, "world_size": small_id}), junk
        ),
        "baseTimeNanoseconds": st.one_of(st.integers(0, 2 * 10**18), st.integers(-(2**70), 2**70), junk_scalar),
        "deviceProperties": st.one_of(
            st.lists(
                st.fixed_dictionaries(
                    {}, optional={"id": small_id, "name": junk_scalar, "numSms": small_id, "totalGlobalMem": small_id}
                ),
                max_size=2,
            ),
            junk,
        ),
    },
)


x_event = st.builds(
    lambda ev, drop: {k: v for k, v in ev.items() if k not in drop},
    st.fixed_dictionaries({**FIELDS, "ph": st.just("X")}),
    mostly(st.just(frozenset()), st.frozensets(st.sampled_from(sorted(set(FIELDS) - {"ph"})), min_size=1, max_size=3)),
)


def _is_x(e: object) -> bool:
    return isinstance(e, dict) and e.get("ph") == "X"


def check_events(events: list, top: dict | None = None, exact: bool = False) -> Trace | InputError:
    """The property for a list of would-be events: a valid Trace whose events and counted skips
    account for the X events given (exactly, when every item is an X event), or an InputError."""
    out = load(json.dumps({**(top or {}), "traceEvents": events}).encode())  # NaN as Python writes it
    n_x = sum(map(_is_x, events))
    if isinstance(out, InputError):
        return out
    counts: Counter = out.problems.counts
    n = len(out.events)
    time_skipped = sum(counts[r] for r in TIME_SKIPS)
    malformed = sum(v for k, v in counts.items() if k.startswith("events skipped: malformed"))
    assert n >= 1
    assert n + time_skipped <= n_x, (n, time_skipped, n_x, dict(counts))  # never more events than X given
    assert n + time_skipped + malformed >= n_x, (n, dict(counts))  # every X event is read or counted
    if exact:
        assert n + time_skipped + malformed == n_x, (n, dict(counts))
    return out


@fuzz(200)
@given(events=st.lists(item, max_size=25), top=top_level)
def test_random_event_lists(events, top):
    check_events(events, top)


@fuzz(60)
@given(events=st.lists(x_event, min_size=1, max_size=15))
def test_random_x_events_are_read_or_counted(events):
    """Only X events: each is in the table or counted under exactly one reason."""
    out = check_events(events, exact=True)
    if isinstance(out, InputError):
        assert "no readable events" in out.problem, out.problem


def _x(**kw) -> dict:
    return {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5, **kw}


OP = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 50}

# Inputs that random search reaches only rarely, each once, as the property demands.
EDGE_CASES = {
    "ts is a list": [OP, _x(ts=[1, 2])],
    "dur is an object": [OP, _x(dur={"us": 5})],
    "ts is true": [OP, _x(ts=True)],
    "ts past int64 ns (int)": [OP, _x(ts=2**62)],
    "dur past int64 ns (int)": [OP, _x(dur=10**17)],
    "ts past uint64 (int)": [OP, _x(ts=2**64 + 1)],
    "ts past int64 ns (text)": [OP, _x(ts="99999999999999999.5")],
    "External id past int64": [OP, _x(args={"External id": 2**63})],
    "External id past uint64": [OP, _x(args={"External id": 2**64 + 5})],
    "correlation at int64 min": [OP, _x(args={"correlation": -(2**63)})],
    "stream past int64": [OP, _x(args={"stream": 2**63 + 1})],
    "device past 32 bits": [OP, _x(args={"device": 2**40, "stream": 2**40})],
    "pid past int64": [_x(pid=2**64), OP],
    "tid text": [OP, dict(OP, tid="stream 7"), dict(OP, tid="")],
    "External id text": [OP, _x(args={"External id": "abc"})],
    "correlation float": [OP, _x(args={"correlation": 1.5})],
    "Input Dims a number": [dict(OP, args={"Input Dims": 7, "Input type": {"a": 1}})],
    "bytes text": [OP, _x(cat="gpu_memcpy", args={"bytes": "lots"})],
    "memory sample past int64": [
        OP,
        {"ph": "i", "name": "[memory]", "ts": 3, "args": {"Bytes": 2**64, "Device Type": 1, "Device Id": 2**63}},
    ],
    "fwdbwd flow with junk": [
        OP,
        {"ph": "s", "cat": "fwdbwd", "id": [1], "ts": "x", "tid": None},
        {"ph": "f", "cat": "fwdbwd", "id": 2**64, "ts": 1, "tid": 1},
    ],
    "process_name without a name": [OP, {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": None}}],
    "ProfilerStep with junk number": [
        dict(OP, name="ProfilerStep#99999999999999999999999"),
        dict(OP, name="ProfilerStep#"),
    ],
    "ProfilerStep off the host": [dict(OP, name="ProfilerStep#3", tid=-2), _x(name="ProfilerStep#4")],
    "NaN inside an args array": [dict(OP, args={"Concrete Inputs": [float("nan"), float("inf")]})],
}
EDGE_TOPS = {
    "plain": {},
    "deviceProperties a number": {"deviceProperties": 5},
    "deviceProperties junk entries": {"deviceProperties": [{"id": "0", "name": 5, "numSms": 2**70}, "gpu"]},
    "base past int64": {"baseTimeNanoseconds": 2**70},
    "base near int64 max": {"baseTimeNanoseconds": 2**63 - 10},
    "base negative": {"baseTimeNanoseconds": -(2**63)},
    "rank huge": {"distributedInfo": {"rank": 2**64, "world_size": "eight"}},
    # found by fuzzing (issue 11): a KeyError before, 'internal error' in the CLI
    "computeMajor without computeMinor": {"deviceProperties": [{"id": 0, "name": "gpu", "computeMajor": 8}]},
    "computeMinor null": {"deviceProperties": [{"id": 0, "computeMajor": 9, "computeMinor": None}]},
}


@pytest.mark.parametrize("events", EDGE_CASES.values(), ids=EDGE_CASES.keys())
def test_edge_events(events):
    check_events(events)


@pytest.mark.parametrize("top", EDGE_TOPS.values(), ids=EDGE_TOPS.keys())
def test_edge_metadata(top):
    check_events([OP, _x(), _x(ts=20, args={"device": 3})], top)


def test_huge_integer_times_are_counted_not_wrapped():
    """Integer µs whose ns do not fit int64 are not finite numbers to the reader, as the same
    digits written as text are; they must not wrap around to some other time. Epoch µs (16
    digits, as 2021-2023 Kineto wrote them) still read exactly."""
    epoch_us = 1694128201442995
    events = [dict(OP, ts=epoch_us), _x(ts=2**62), _x(dur=10**17), _x(ts=-(2**62)), _x(ts="4611686018427387904")]
    out = check_events(events)
    assert isinstance(out, Trace)
    assert out.events["ts"].tolist() == [epoch_us * 1000]
    assert out.problems.counts["events skipped: ts or dur is not a finite number"] == 4


@fuzz(40)
@given(
    events=st.lists(
        st.fixed_dictionaries(
            {
                "ph": st.just("X"),
                "cat": st.sampled_from(["cpu_op", "kernel", "cuda_runtime"]),
                "name": st.text(max_size=5),
                "pid": st.integers(0, 3),
                "tid": st.integers(0, 3),
                "ts": sane_us,
                "dur": st.integers(0, 500),
            },
            optional={"args": args},
        ),
        min_size=1,
        max_size=20,
    )
)
def test_wrong_typed_known_args(events):
    """'External id': 'abc', 'correlation': 1.5, 'Input Dims': 7 ...: skipped and counted, or read."""
    out = load(json.dumps({"traceEvents": events}).encode())
    if isinstance(out, InputError):
        assert "no readable events" in out.problem or "malformed" in out.problem, out.problem
        return
    counts = out.problems.counts
    malformed = sum(v for k, v in counts.items() if k.startswith("events skipped: malformed"))
    assert len(out.events) + malformed == len(events), dict(counts)
