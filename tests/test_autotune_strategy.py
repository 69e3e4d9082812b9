"""Candidates hash stably; the roofline strategy follows the analysis (the kernel losing most
time to its floor first, the lever its bound calls for, candidates by analytic floor, pruned
above the best measured time); TPE and random are seeded."""

from __future__ import annotations

import hashlib

import pytest

from profiler.autotune.db import Trial
from profiler.autotune.space import Candidate, Dimension, Space
from profiler.autotune.strategy import RandomStrategy, RooflineStrategy, TPEStrategy

T = ((("m", 8), ("n", 64)), (("m", 8), ("n", 32)), (("m", 8), ("n", 128)))
SPACE = Space(
    (
        Dimension("tile:mm", "tile", T, ("mm",)),
        Dimension("fusion:mm", "fusion", ("fused", "split"), ("mm",)),
        Dimension("fusion:pow", "fusion", ("fused", "split"), ("pow",)),
        Dimension("precision:fc", "precision", ("bf16", "fp32", "int8"), ("mm",), "fc"),
    ),
    "bf16",
)


def test_candidate_hash_is_sha256_of_canonical_json():
    assert SPACE.candidate({}).hash == hashlib.sha256(b"{}").hexdigest()
    c = SPACE.candidate({"fusion:pow": "split", "tile:mm": {"n": 32, "m": 8}})
    # defaults dropped, keys sorted, a tile as a mapping with sorted keys, no spaces
    text = b'{"fusion:pow":"split","tile:mm":{"m":8,"n":32}}'
    assert c.hash == hashlib.sha256(text).hexdigest()
    same = SPACE.candidate({"tile:mm": {"m": 8, "n": 32}, "fusion:pow": "split", "fusion:mm": "fused"})
    assert same == c and same.hash == c.hash and Candidate.from_json(c.to_json()) == c
    with pytest.raises(ValueError):
        SPACE.candidate({"tile:mm": {"m": 16, "n": 32}})  # not an option of the space


def test_space_size_and_enumeration_are_the_product():
    assert SPACE.size == 3 * 2 * 2 * 3
    every = list(SPACE.enumerate())
    assert len({c.hash for c in every}) == 36 and every[0] == SPACE.candidate({})
    assert Space.from_dict(SPACE.to_dict()) == SPACE


def _trial(seq: int, c: Candidate, time_ns: int, kernels: list[dict]) -> Trial:
    return Trial(c.hash, seq, "roofline", c.to_json(), time_ns, "", 0.0, "", {"kernels": kernels}, 0.0)


def _row(name, time_ns, floor, comp, mem, run, bound):  # type: ignore[no-untyped-def]
    return {
        "name": name,
        "time_ns": time_ns,
        "floor_ns": floor,
        "t_compute_ns": comp,
        "t_memory_ns": mem,
        "t_runtime_ns": run,
        "bound": bound,
        "efficiency": floor / time_ns,
    }


def test_roofline_attacks_the_largest_loss_with_its_bounds_lever():
    # mm: compute bound, 40 us against a 10 us floor (30 us lost); pow: runtime bound at its
    # 5 us dispatch floor (nothing lost). Baseline total 45 us.
    rows = [
        _row("mm", 40_000, 10_000, 10_000, 2_000, 5_000, "compute"),
        _row("pow", 5_000, 5_000, 10, 20, 5_000, "runtime"),
    ]
    s = RooflineStrategy(SPACE, 0, {"bf16": 1e12, "fp32": 0.25e12, "int8": 2e12})
    base = s.propose()
    assert base.candidate == SPACE.candidate({}) and base.finding == "baseline"
    s.observe(base.candidate, _trial(0, base.candidate, 45_000, rows))
    got = [s.propose() for _ in range(4)]
    for p in got:
        s.observe(p.candidate, _trial(1, p.candidate, 46_000, rows))  # none improves
    # compute bound -> tiling and precision of mm, ordered by analytic floor (ns):
    #   tile change: pow 5000 + mm floor max(10000, 2000, 5000) = 15000
    #   int8: pow 5000 + max(10000 x 1e12/2e12, 2000 x 1/2, 5000) = 5000 + 5000 = 10000
    #   fp32: pow 5000 + max(10000 x 4, 2000 x 2, 5000) = 45000 (= best: kept, not above it)
    assert got[0].candidate == SPACE.candidate({"precision:fc": "int8"})
    assert {p.candidate for p in got[1:3]} == {SPACE.candidate({"tile:mm": t}) for t in T[1:]}
    assert got[3].candidate == SPACE.candidate({"precision:fc": "fp32"})
    assert got[0].finding.startswith("mm: compute-bound, 40.000 us against a 10.000 us floor (25%), 30.000 us lost")
    assert "floor 10.000 us" in got[0].finding
    # fusion is not compute's lever: splitting mm comes only once the ranked kernels' levers are
    # spent (floor pow 5000 + mm 10000 + one more dispatch 5000 = 20000); splitting pow (runtime
    # bound, at its floor) adds a dispatch: 40000 + 5000 + 5000 = 50000 > 45000 measured: pruned
    rest = []
    while not (p := s.propose()).finding.startswith("random"):
        rest.append(p)
        s.observe(p.candidate, _trial(9, p.candidate, 46_000, rows))
    assert all("bound's levers)" in p.finding for p in rest)
    assert [p.floor for p in rest] == sorted(p.floor for p in rest)
    assert SPACE.candidate({"fusion:mm": "split"}) in [p.candidate for p in rest]
    assert SPACE.candidate({"fusion:pow": "split"}) not in [p.candidate for p in rest]


def test_roofline_follows_the_new_bottleneck_after_an_improvement():
    rows = [
        _row("mm", 40_000, 10_000, 10_000, 2_000, 5_000, "compute"),
        _row("pow", 5_000, 5_000, 10, 20, 5_000, "runtime"),
    ]
    s = RooflineStrategy(SPACE, 0, {"bf16": 1e12, "fp32": 0.25e12, "int8": 2e12})
    b = s.propose()
    s.observe(b.candidate, _trial(0, b.candidate, 45_000, rows))
    p = s.propose()
    # int8 made mm memory bound at 12 us: the next move starts from the new best's analysis
    new = [
        _row("mm", 12_000, 8_000, 5_000, 8_000, 5_000, "memory"),
        _row("pow", 5_000, 5_000, 10, 20, 5_000, "runtime"),
    ]
    s.observe(p.candidate, _trial(1, p.candidate, 17_000, new))
    q = s.propose()
    assert q.finding.startswith("mm: memory-bound, 12.000 us against a 8.000 us floor")
    assert dict(q.candidate.choices)["precision:fc"] == "int8"  # moves from the new best


def _fake_time(c: Candidate) -> int:
    return 1000 + int(c.hash[:3], 16)


@pytest.mark.parametrize("cls", [RandomStrategy, TPEStrategy])
def test_seeded_strategies_repeat_and_never_propose_a_tried_candidate(cls):
    if cls is TPEStrategy:
        pytest.importorskip("optuna")

    def sequence(seed: int) -> list[str]:
        s, out = cls(SPACE, seed), []
        for i in range(12):
            p = s.propose()
            out.append(p.candidate.hash)
            s.observe(p.candidate, _trial(i, p.candidate, _fake_time(p.candidate), []))
        return out

    a = sequence(5)
    assert a == sequence(5) and len(set(a)) == 12 and a[0] == SPACE.candidate({}).hash


def test_exhaustive_covers_the_space_once_then_stops(tmp_path):
    from profiler.autotune.db import Study, TrialDB
    from profiler.autotune.loop import tune
    from profiler.autotune.runner import TrialResult
    from profiler.autotune.strategy import ExhaustiveStrategy

    class Fake:
        name, hardware = "simulator", "edge-npu"

        def run(self, c):  # type: ignore[no-untyped-def]
            return TrialResult(_fake_time(c))

    study = Study("w", "edge-npu", "simulator", "synthetic")
    trials = tune(SPACE, Fake(), ExhaustiveStrategy(SPACE), TrialDB(tmp_path / "t.sqlite"), study, 50)
    # 36 points: every one once, the baseline first, then the strategy has nothing left (budget 50)
    assert len(trials) == 36 and trials[0].candidate == {}
    assert len({t.candidate_hash for t in trials}) == 36
