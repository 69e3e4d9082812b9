"""LLM serving on the simulated accelerator at kernel granularity (issue 13, "Speed"): the
Llama-2-7B-shaped decoder (32 layers), a prefill of 2,048 tokens and 128 decode steps over the
growing KV cache, on one chip and on 8 chips with tensor parallelism (datacenter-npu).

    python benchmarks/bench_simulate.py [--workload llama2-7b] [--batch 1] [--prompt 2048]
        [--decode 128] [--chips 1 --chips 8] [--accel datacenter-npu] [--precision bf16]
        [--peer] [--trace]

Compile time (the prefill program and the decode program at two cache lengths) is reported
apart from simulation time. Simulation = `serving.simulate_serving`: every step's kernels timed
(each distinct kernel shape once, accelerator/sim/reuse.py) and laid out on the step's clock.
Reported: wall and CPU seconds (the simulator is single-threaded: CPU seconds are its time on
one core, steadier than wall time on a shared machine), kernels simulated (chip 0's: with
tensor parallelism every chip runs the same kernels), kernels per second, kernel shapes timed.
`--peer` also runs every step through `run.simulate` (every kernel timed, every chip's copy
made) in the same process and prints the ratio; `--trace` also writes the serving trace and
runs the LLM analysis on it (what `perf simulate ... --json` adds). Goal: under 10 s."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from accelerator.hardware import load_accel  # noqa: E402
from accelerator.sim.run import simulate  # noqa: E402
from accelerator.sim.serving import compile_serving, simulate_serving  # noqa: E402

GOAL_S = 10.0  # issue 13: prefill 2,048 + 128 decode steps of Llama-2-7B in under 10 s on one core


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(t: tuple[float, float]) -> tuple[float, float]:
    return time.perf_counter() - t[0], time.process_time() - t[1]


def _peer(programs, hw) -> tuple[float, float, int]:
    """Every step through run.simulate: (wall s, CPU s, chip 0's kernels)."""
    t = _clock()
    kernels = len([k for k in simulate(programs.prefill, hw).kernels if k.chip == 0])
    for i in range(programs.decode):
        run = simulate(programs.decoder.at(programs.prompt + i + 1), hw)
        kernels += len([k for k in run.kernels if k.chip == 0])
    wall, cpu = _since(t)
    return wall, cpu, kernels


def _trace(srun) -> None:
    import tempfile

    import orjson

    from accelerator.sim.serving_trace import serving_document
    from profiler import api

    t = _clock()
    data = orjson.dumps(serving_document(srun))
    wall, cpu = _since(t)
    print(f"    trace document  {wall:8.2f} s wall {cpu:8.2f} s CPU   {len(data) / 2**20:,.0f} MiB")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "serving.json"
        path.write_bytes(data)
        del data
        t = _clock()
        result = api.analyze(api.load_trace(path), sections=("summary", "memory", "llm"))
        wall, cpu = _since(t)
    s = {r["phase"]: r for r in result.llm_summary.to_dict("records")}
    print(f"    load + LLM analysis {wall:8.2f} s wall {cpu:8.2f} s CPU")
    pre, dec = s["prefill"], s["decode"]
    print(
        f"    from the trace: TTFT {pre['ttft_ns'] / 1e6:,.2f} ms, TPOT {dec['tpot_ns'] / 1e6:,.3f} ms, "
        f"{dec['tokens_per_s']:,.1f} decode tokens/s, KV cache "
        f"{result.kv_cache['kv_cache_bytes'].iloc[0] / 2**30:,.3f} GiB per chip"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="llama2-7b")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=2048)
    ap.add_argument("--decode", type=int, default=128)
    ap.add_argument("--chips", type=int, action="append")
    ap.add_argument("--accel", default="datacenter-npu")
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--peer", action="store_true", help="also time every kernel with run.simulate")
    ap.add_argument("--trace", action="store_true", help="also write the trace and analyse it")
    args = ap.parse_args()
    hw = load_accel(args.accel)
    for chips in args.chips or [1, 8]:
        t = _clock()
        programs = compile_serving(
            args.workload, hw, args.batch, args.prompt, args.decode, args.precision, chips
        )  # fmt: skip
        compile_wall, _ = _since(t)
        t = _clock()
        srun = simulate_serving(programs, hw)
        wall, cpu = _since(t)
        verdict = "meets" if cpu < GOAL_S else "MISSES"
        print(
            f"{args.workload}-shaped, batch {args.batch}, prefill {args.prompt} + {args.decode} decode steps, "
            f"{args.precision} on {args.accel} x{chips}"
        )
        print(f"    compile         {compile_wall:8.2f} s wall (prefill + decode at 2 cache lengths; apart)")
        print(
            f"    simulate        {wall:8.2f} s wall {cpu:8.2f} s CPU   {srun.kernels:,} kernels, "
            f"{srun.kernels / cpu:,.0f} kernels/s (CPU), {srun.timed:,} kernel shapes timed  "
            f"({verdict} the goal < {GOAL_S:g} s CPU)"
        )
        print(
            f"    simulated       TTFT {srun.steps[0].run.total_s * 1e3:,.2f} ms, "
            f"decode {sum(s.run.total_s for s in srun.steps[1:]) * 1e3:,.1f} ms in all"
        )
        if args.peer:
            p_wall, p_cpu, p_kernels = _peer(programs, hw)
            assert p_kernels == srun.kernels
            print(
                f"    peer (run.simulate every kernel) {p_wall:8.2f} s wall {p_cpu:8.2f} s CPU   "
                f"t_peer/t_ours = {p_cpu / cpu:.1f}x (CPU)"
            )
        if args.trace:
            _trace(srun)
        print()


if __name__ == "__main__":
    main()
