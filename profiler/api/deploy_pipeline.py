"""`perf gate --config gates.toml`: one release check from a pipeline file (docs/deploy.md).

The file (TOML, read with tomllib; paths relative to the file's folder):

    [model]
    factory = "pkg.module:factory"     # required: MODULE:FACTORY
    input = ["2x3x8x8"]                # SHAPE[:DTYPE] per model input (or the model's example_inputs)
    calibration = "calib.npy"          # optional: int8 calibration batches (.pt/.npy)
    inputs = "eval.npy"                # optional: the accuracy gate compares on its first batch

    [candidate]
    target = "qnn-sim:int8-qnn"        # required: BACKEND[:PRECISION]

    [accuracy]                         # optional: the accuracy gate
    budget = 0.05                      # required in the section: output rel_error at most this
    threshold = 0.1                    # optional: rel_error past which a layer diverges

    [latency]                          # optional: the latency gate
    baseline = "baselines/qnn"         # required in the section: a trace file or a directory of runs
    repeats = 3                        # runs of the candidate (fresh sessions)
    steps = 10                         # inferences per run
    max_regression = 10.0              # percent
    tolerance = 10.0                   # optional, percent: the rule with fewer than 3 runs a side
    keep = "out/runs"                  # optional: keep the candidate's runs (the next baseline)

At least one of [accuracy] and [latency]. Stages run in order (export and precision happen
inside each gate: the accuracy gate exports to compare layers, the latency gate exports once and
profiles `repeats` times); each stage's seconds are reported. Passed when every gate passed.
"""

from __future__ import annotations

import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profiler.model.errors import InputError

_KEYS: dict[str, dict[str, Any]] = {
    "model": {"factory": str, "input": list, "calibration": str, "inputs": str},
    "candidate": {"target": str},
    "accuracy": {"budget": (int, float), "threshold": (int, float)},
    "latency": {
        "baseline": str,
        "repeats": int,
        "steps": int,
        "max_regression": (int, float),
        "tolerance": (int, float),
        "keep": str,
    },
}
_REQUIRED: dict[str, tuple[str, ...]] = {
    "model": ("factory",),
    "candidate": ("target",),
    "accuracy": ("budget",),
    "latency": ("baseline",),
}


@dataclass(frozen=True)
class PipelineResult:
    """The gates that ran (accuracy: NumericsReport and its verdict; latency: LatencyGate), each
    stage's seconds, and the verdict."""

    config: str
    candidate: str
    accuracy: Any  # (NumericsReport, budget, passed) or None
    latency: Any  # LatencyGate or None
    seconds: dict[str, float]

    @property
    def passed(self) -> bool:
        return (self.accuracy is None or self.accuracy[2]) and (self.latency is None or self.latency.passed)


def read_config(path: Path) -> dict[str, dict[str, Any]]:
    """The pipeline file, checked: known sections and keys, their types, the required ones."""
    from profiler.model.files import read_bounded

    if not path.is_file():
        raise InputError(path, "no such pipeline file (TOML)")
    try:
        doc = tomllib.loads(read_bounded(path, 2**20).decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise InputError(path, f"not a readable TOML pipeline file: {e}") from None
    for section, table in doc.items():
        if section not in _KEYS or not isinstance(table, dict):
            raise InputError(path, f"unknown section [{section}] (sections: {', '.join(_KEYS)})")
        for key, value in table.items():
            want = _KEYS[section].get(key)
            if want is None:
                raise InputError(path, f"[{section}] unknown key {key!r} (keys: {', '.join(_KEYS[section])})")
            if not isinstance(value, want) or isinstance(value, bool):
                raise InputError(path, f"[{section}] {key} = {value!r}: wrong type")
    for section, keys in _REQUIRED.items():
        if section in doc or section in ("model", "candidate"):
            for key in keys:
                if key not in doc.get(section, {}):
                    raise InputError(path, f"[{section}] needs {key}")
    if "accuracy" not in doc and "latency" not in doc:
        raise InputError(path, "no gate: give an [accuracy] or a [latency] section (or both)")
    return doc


def run_pipeline(path: Path) -> PipelineResult:
    """Run the pipeline file's gates (module docstring)."""
    from profiler.api.deploy import numerics_diff, parse_candidate
    from profiler.api.deploy_gates import latency_gate

    doc = read_config(path)
    here = path.resolve().parent
    m, target = doc["model"], str(doc["candidate"]["target"])
    parse_candidate(target)  # a bad target is told before any export
    inputs = [str(x) for x in m.get("input", [])]
    calib = here / m["calibration"] if "calibration" in m else None
    seconds: dict[str, float] = {}
    accuracy = latency = None
    if "accuracy" in doc:
        a = doc["accuracy"]
        t0 = time.perf_counter()
        report = numerics_diff(
            m["factory"],
            inputs,
            target,
            threshold=float(a.get("threshold", 0.1)),
            inputs_file=here / m["inputs"] if "inputs" in m else None,
            calibration=calib,
        )
        seconds["accuracy (export, precision, per-layer diff)"] = time.perf_counter() - t0
        budget = float(a["budget"])
        accuracy = (report, budget, report.output.rel_error <= budget)
    if "latency" in doc:
        lat = doc["latency"]
        t0 = time.perf_counter()
        latency = latency_gate(
            [here / lat["baseline"]],
            m["factory"],
            inputs,
            target,
            repeats=int(lat.get("repeats", 3)),
            steps=int(lat.get("steps", 10)),
            max_regression=float(lat.get("max_regression", 10.0)),
            tolerance=float(lat["tolerance"]) if "tolerance" in lat else None,
            calibration=calib,
            keep=here / lat["keep"] if "keep" in lat else None,
        )
        seconds["latency (export, precision, profile runs, gate)"] = time.perf_counter() - t0
    return PipelineResult(str(path), target, accuracy, latency, seconds)
