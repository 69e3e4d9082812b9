"""Ingestion benchmark: bare orjson parse vs HolisticTraceAnalysis vs our CLI.

Usage: bench_ingest.py [TRACE ...] [--big] [--timeout S] [--contenders bare,hta,ours]

Each contender runs in its own fresh interpreter (ingest_child.py), one after
another, so imports, caches and peak memory never leak between them. Time and
memory cover the work after imports, including reading and decompressing the
file. Parent side: standard library + orjson only (run it with the project's
.venv python).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson  # noqa: F401  (the "bare" contender needs it in this interpreter)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TRACES = REPO / "tests" / "data" / "traces"
CHILD = HERE / "ingest_child.py"
HTA_PYTHON = HERE / ".venv-hta" / "bin" / "python"
BIG_TRACE = HERE / "data" / "big_trace.json"
MiB = 2**20

LABELS = {
    "bare": "orjson.loads (bare parse)",
    "hta": "HTA load + temporal breakdown",
    "ours": "perf analyze --json (ours)",
    "ours-full": "  same, all sections (roofline..)",
}

# Targets for our tool, checked at the end of each trace's table.
TARGET_VS_HTA = 5.0  # ours at least 5x faster than HTA
TARGET_VS_BARE = 2.0  # ours at most 2x the bare parse time
TARGET_MEM_RATIO = 3.0  # our peak memory at most 3x the uncompressed trace


@dataclass
class Result:
    contender: str
    status: str  # ok | skip | timeout | OOM | error
    seconds: float | None = None
    peak_mib: float | None = None
    reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def gz_trailer_size(path: Path) -> int:
    """Uncompressed size from the gzip trailer (mod 2**32): cheap, for picking the largest trace."""
    with open(path, "rb") as fh:
        fh.seek(-4, os.SEEK_END)
        return int.from_bytes(fh.read(4), "little")


def default_trace() -> Path:
    """The largest real trace in tests/data/traces (by uncompressed size)."""
    cands = sorted(TRACES.glob("*/*.json.gz"), key=gz_trailer_size)
    if not cands:
        sys.exit(f"no traces under {TRACES}; pass TRACE paths")
    return cands[-1]


def uncompressed_size(path: Path) -> int:
    """Bytes of JSON text; reading it all also warms the page cache for every contender."""
    total = 0
    with open(path, "rb") as fh:
        gz = fh.read(2) == b"\x1f\x8b"
    with gzip.open(path, "rb") if gz else open(path, "rb") as fh:
        while chunk := fh.read(16 * MiB):
            total += len(chunk)
    return total


def mem_total_bytes() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


def run_contender(name: str, trace: Path, timeout: float, mem_limit: int, hta_python: Path) -> Result:
    """Run one contender in a fresh subprocess and collect its result file."""
    python = str(hta_python) if name == "hta" else sys.executable
    if name == "hta" and not hta_python.exists():
        return Result(name, "skip", reason=f"{hta_python} missing: run benchmarks/setup_hta_env.sh")
    env = dict(os.environ)
    if name.startswith("ours"):
        # `python -m profiler` from the repo root works without an install; src/ layout too
        paths = [str(REPO), str(REPO / "src"), env.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)

    def limit_memory() -> None:
        # an address-space cap turns a runaway contender into a MemoryError in
        # that child instead of waking the kernel OOM killer on a shared machine
        if mem_limit > 0:
            resource.setrlimit(resource.RLIMIT_AS, (mem_limit, mem_limit))

    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        result_file = Path(tmp) / "result.json"
        log_file = Path(tmp) / "log.txt"
        with open(log_file, "wb") as log:
            proc = subprocess.Popen(
                [python, str(CHILD), name, str(trace), str(result_file)],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=limit_memory,
                start_new_session=True,  # own group: kill HTA's workers too
            )
            try:
                rc = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                return Result(name, "timeout", reason=f"> {timeout:.0f} s")
        log_tail = log_file.read_text(errors="replace")[-1500:]
        if result_file.exists():
            data = json.loads(result_file.read_text())
            status = data.pop("status")
            return Result(
                name,
                status,
                data.pop("seconds", None),
                data.pop("peak_mib", None),
                data.pop("reason", "") + (f"\n{log_tail}" if status == "error" else ""),
                data,
            )
        if rc == -signal.SIGKILL or "MemoryError" in log_tail or "bad_alloc" in log_tail:
            return Result(name, "OOM", reason=f"rc={rc}\n{log_tail}")
        return Result(name, "error", reason=f"rc={rc}\n{log_tail}")


def fmt(v: float | None, spec: str) -> str:
    """format(v, spec), or a '-' of the same width when there is no value."""
    return format("-", ">" + spec.split(".")[0]) if v is None else format(v, spec)


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def report(trace: Path, size: int, results: dict[str, Result]) -> None:
    """Print the comparison table and the target checks for one trace."""
    ours, bare, hta = results.get("ours"), results.get("bare"), results.get("hta")
    t_ours = ours.seconds if ours and ours.status == "ok" else None
    print(f"\n== {trace}  ({size / MiB:.1f} MiB uncompressed)")
    head = (
        f"{'contender':32} {'status':8} {'seconds':>9} {'cpu s':>7} {'peak MiB':>9} "
        f"{'t/t_ours':>9} {'t_ours/t':>9} {'mem/trace':>9}"
    )
    print(head)
    print("-" * len(head))
    for r in results.values():
        t = r.seconds if r.status == "ok" else None
        print(
            f"{LABELS[r.contender]:32} {r.status:8} {fmt(t, '9.2f')} {fmt(r.extra.get('cpu_seconds'), '7.2f')} "
            f"{fmt(r.peak_mib if t else None, '9.0f')} "
            f"{fmt(ratio(t, t_ours), '9.2f')} {fmt(ratio(t_ours, t), '9.2f')} "
            f"{fmt(ratio(r.peak_mib * MiB, size) if t else None, '9.2f')}"
        )
    for r in results.values():
        if r.status != "ok" and r.reason:
            print(f"  {r.contender}: {r.status}: {r.reason.strip()}")

    def check(label: str, value: float | None, target: float, higher_is_better: bool) -> None:
        if value is None:
            print(f"  {label}: n/a")
            return
        ok = value >= target if higher_is_better else value <= target
        print(
            f"  {label}: {value:.2f}x (target {'>=' if higher_is_better else '<='} {target:g}x) "
            f"{'PASS' if ok else 'FAIL'}"
        )

    print("targets:")
    if t_ours is None:
        print(f"  n/a: ours did not run ({ours.status + ': ' + ours.reason.strip() if ours else 'not selected'})")
        return
    if hta and hta.status == "timeout":
        # HTA did not finish, so it is at least timeout / t_ours slower than ours
        check(
            "ours faster than HTA (lower bound: timeout / t_ours)",
            ratio(hta.extra.get("limit_s"), t_ours),
            TARGET_VS_HTA,
            True,
        )
    elif hta and hta.status == "OOM":
        print("  ours faster than HTA: HTA ran out of memory, ours finished: PASS")
    else:
        check(
            "ours faster than HTA (t_hta / t_ours)",
            ratio(hta.seconds if hta and hta.status == "ok" else None, t_ours),
            TARGET_VS_HTA,
            True,
        )
    check(
        "ours vs bare parse (t_ours / t_bare)",
        ratio(t_ours, bare.seconds if bare and bare.status == "ok" else None),
        TARGET_VS_BARE,
        False,
    )
    child = ours.extra.get("children_extra_mib") or 0.0
    check(
        "ours peak memory / uncompressed trace" + (" (+ forked decoder child, upper bound)" if child else ""),
        ratio((ours.peak_mib + child) * MiB, size),
        TARGET_MEM_RATIO,
        False,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "traces", nargs="*", type=Path, help="trace files (.json or .json.gz); default: the largest real trace"
    )
    ap.add_argument(
        "--big", action="store_true", help=f"also run on {BIG_TRACE.relative_to(REPO)} (generated if absent)"
    )
    ap.add_argument(
        "--contenders",
        default="bare,hta,ours,ours-full",
        help="comma list of bare, hta, ours (the foundation report), ours-full (every section)",
    )
    ap.add_argument("--repeat", type=int, default=1, help="runs per contender; the fastest run is reported")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per contender run")
    ap.add_argument(
        "--mem-limit-gb",
        type=float,
        default=round(mem_total_bytes() * 0.85 / 2**30, 1),
        help="address-space cap per contender in GiB (0: none; default 85%% of RAM)",
    )
    ap.add_argument("--hta-python", type=Path, default=HTA_PYTHON)
    ap.add_argument("--json-out", type=Path, help="also write all results here")
    args = ap.parse_args(argv)

    contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    if unknown := set(contenders) - set(LABELS):
        ap.error(f"unknown contenders: {sorted(unknown)}")
    traces: list[Path] = list(args.traces) or [default_trace()]
    if args.big:
        if not BIG_TRACE.exists():
            print(f"generating {BIG_TRACE} ...", flush=True)
            subprocess.run([sys.executable, str(HERE / "make_big_trace.py"), str(BIG_TRACE)], check=True)
        traces.append(BIG_TRACE)

    mem_limit = int(args.mem_limit_gb * 2**30)
    print(
        f"targets: ours >= {TARGET_VS_HTA:g}x faster than HTA; ours <= {TARGET_VS_BARE:g}x bare parse time; "
        f"ours peak memory <= {TARGET_MEM_RATIO:g}x uncompressed trace"
    )
    cap = f"memory cap {args.mem_limit_gb:g} GiB (RLIMIT_AS)" if mem_limit else "no memory cap"
    print(f"each contender in a fresh process; timeout {args.timeout:.0f} s; {cap}")
    everything: list[dict[str, Any]] = []
    for trace in traces:
        trace = trace.resolve()
        size = uncompressed_size(trace)
        results: dict[str, Result] = {}
        for name in contenders:
            print(f"  {trace.name}: {name} ...", end="", flush=True)
            runs = []
            for _ in range(max(1, args.repeat)):
                runs.append(run_contender(name, trace, args.timeout, mem_limit, args.hta_python))
                if runs[-1].status != "ok":  # a timeout / OOM / skip will not improve on a rerun
                    break
            ok = [x for x in runs if x.status == "ok"]
            r = min(ok, key=lambda x: x.seconds or 0.0) if len(ok) == len(runs) else runs[-1]
            if len(ok) > 1:
                # fastest run's time, but the worst peak seen, so memory is not flattered
                r.peak_mib = max(x.peak_mib or 0.0 for x in ok)
                r.extra["all_seconds"] = [x.seconds for x in ok]
            r.extra.setdefault("limit_s", args.timeout)
            results[name] = r
            print(f" {r.status}" + (f" {r.seconds:.2f} s, {r.peak_mib:.0f} MiB" if r.status == "ok" else ""))
        report(trace, size, results)
        everything += [{"trace": str(trace), "uncompressed_bytes": size, **r.__dict__} for r in results.values()]
    if args.json_out:
        args.json_out.write_text(json.dumps(everything, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
