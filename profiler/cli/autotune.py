"""`perf autotune MODEL --accel PRESET|--runner inductor [--precision P] [--budget N] [--seed S]
[--strategy roofline|random|tpe|exhaustive] [--db trials.sqlite] [--resume] [--plan-out FILE]
[--force] [--json] [--accuracy-budget X]`: search the compiler's fusion, tiling, precision and
partitioning choices for MODEL on the simulated accelerator (profiler/autotune), every trial
checked in functional mode before its time counts and stored in the trials database; with
`--runner inductor`, Inductor's CPU code-generation options on this machine's CPU, every trial
compiled with torch.compile, checked against eager and measured (profiler/autotune/inductor.py).

Progress on stderr (trials, best so far, elapsed, the finding being attacked); on stdout the
baseline against the tuned plan per kernel (speedup, what changed, which finding led to it) and
the speed/accuracy front, or with --json the document of profiler/autotune/report.summary.
`--plan-out` writes the best plan as a file `perf compile --plan` and `perf simulate --plan`
read (with the precision flags it names). Registered on the CLI by `register(app)`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from profiler.cli.common import app

STRATEGIES = ("roofline", "random", "tpe", "exhaustive")
RUNNERS = ("simulator", "inductor")
ROWS_SHOWN = 15


def _progress(budget: int):  # type: ignore[no-untyped-def]
    def show(trial: Any, stored: int, best: Any, elapsed: float, finding: str) -> None:
        now = f"{trial.time_ns / 1e3:,.3f} us" if trial.ok else f"failed ({trial.failure})"
        b = f"{best.time_ns / 1e3:,.3f} us" if best is not None else "none yet"
        print(
            f"[{stored}/{budget}] {now}; best {b}; {elapsed:,.1f} s; {finding or trial.strategy}",
            file=sys.stderr,
            flush=True,
        )

    return show


def _print_table(doc: dict) -> None:
    base, best = doc["baseline"], doc["best"]
    print(
        f"{doc['model']} on {doc['accel']} ({doc['precision']}): {doc['trials']} trials "
        f"({doc['failed']} failed) in a space of {doc['space_size']:,} points over {doc['dimensions']} choices"
    )
    if base is None or best is None or base["time_ns"] is None:
        print("no trial passed its check: nothing to compare")
        return
    print(
        f"baseline {base['time_ns'] / 1e3:,.3f} us -> tuned {best['time_ns'] / 1e3:,.3f} us: "
        f"{doc['speedup']:.3f}x (candidate {best['candidate_hash'][:12]}, trial {best['seq']})"
    )
    for what in ("baseline", "best"):
        m = doc[what].get("spread")
        if m:  # a measured runner: the noise next to the speedup
            print(
                f"{what}: median {m['median_ns'] / 1e3:,.3f} us, IQR {m['iqr_ns'] / 1e3:,.3f} us, "
                f"min {m['min_ns'] / 1e3:,.3f} max {m['max_ns'] / 1e3:,.3f} us ({m['repeats']} x {m['number']} calls)"
            )
    if best["candidate"]:
        print("tuned plan: " + "; ".join(f"{k}={v}" for k, v in best["candidate"].items()))
    rows = [r for r in doc["kernels"] if r["changed"] or r["baseline_ns"] != r["tuned_ns"]]
    if not rows:
        print("the compiler's own plan was the fastest found")
    else:
        print(f"{'kernel':<30}{'baseline us':>13}{'tuned us':>11}{'speedup':>9}  changed; finding")
        said: set[str] = set()  # a whole-graph option's finding touches every kernel: said once
        for r in rows[:ROWS_SHOWN]:
            b = f"{r['baseline_ns'] / 1e3:,.3f}" if r["baseline_ns"] is not None else "-"
            t = f"{r['tuned_ns'] / 1e3:,.3f}" if r["tuned_ns"] is not None else "-"
            s = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
            why = f"; {r['finding']}" if r["finding"] and r["finding"] not in said else ""
            said.add(r["finding"])
            print(f"{r['kernel']:<30}{b:>13}{t:>11}{s:>9}  {r['changed'] or '(placement/neighbours)'}{why}")
        if len(rows) > ROWS_SHOWN:
            print(f"... {len(rows) - ROWS_SHOWN} more kernels (--json has them all)")
    if len(doc["front"]) > 1 or any(f["accuracy_error"] for f in doc["front"]):
        print("speed/accuracy front (accepted plans):")
        for f in doc["front"]:
            err = f"{f['accuracy_error']:.3g}" if f["accuracy_error"] is not None else "-"
            print(f"    {f['time_ns'] / 1e3:>12,.3f} us  error {err}  {f['candidate_hash'][:12]}")


def register(app: typer.Typer) -> None:
    @app.command("autotune")
    def autotune_cmd(
        model: Annotated[str, typer.Argument(help="A workload (perf simulate --list) or MODULE:FACTORY.")],
        accel: Annotated[str, typer.Option("--accel", help="edge-npu, datacenter-npu or a YAML file.")] = "",
        runner_name: Annotated[
            str, typer.Option("--runner", help="simulator (with --accel) or inductor (torch.compile on this CPU).")
        ] = "simulator",
        precision: Annotated[
            str | None,
            typer.Option(
                "--precision", help="The baseline policy: fp32, bf16, int8, fp8 (default bf16; inductor: fp32)."
            ),
        ] = None,
        budget: Annotated[int, typer.Option("--budget", help="Trials stored for this study, baseline included.")] = 50,
        seed: Annotated[int, typer.Option("--seed", help="Seed of the strategy's random choices.")] = 0,
        strategy: Annotated[str, typer.Option("--strategy", help="roofline, random, tpe or exhaustive.")] = "roofline",
        db: Annotated[Path, typer.Option("--db", help="The SQLite trials database.")] = Path("trials.sqlite"),
        resume: Annotated[bool, typer.Option("--resume", help="Continue the study --db holds.")] = False,
        plan_out: Annotated[
            Path | None, typer.Option("--plan-out", help="Write the best plan (perf compile/simulate --plan).")
        ] = None,
        force: Annotated[bool, typer.Option("--force", help="Overwrite --plan-out.")] = False,
        json: Annotated[bool, typer.Option("--json", help="Write the result as JSON.")] = False,
        accuracy_budget: Annotated[
            float | None,
            typer.Option(
                "--accuracy-budget",
                help="Largest relative error accepted; turns on per-layer precision (simulator).",
            ),
        ] = None,
    ) -> None:
        """Search fusion, tiling, precision and partitioning for MODEL on the simulated accelerator
        (or Inductor's options on this CPU with --runner inductor), each trial checked before its
        time counts, the analysis choosing the next move."""
        from profiler.cli.common import fail, one_line_errors, require_torch

        strategy = strategy.strip().lower()
        runner_name = runner_name.strip().lower()
        if strategy not in STRATEGIES:
            fail(f"--strategy {strategy}: expected one of {', '.join(STRATEGIES)}")
        if runner_name not in RUNNERS:
            fail(f"--runner {runner_name}: expected one of {', '.join(RUNNERS)}")
        if runner_name == "inductor" and accel:
            fail(f"--accel {accel}: names a simulated accelerator; --runner inductor runs on this machine's CPU")
        if runner_name == "simulator" and not accel:
            fail("--accel PRESET_OR_YAML is required (presets: datacenter-npu, edge-npu), or --runner inductor")
        if budget < 1:
            fail(f"--budget {budget}: expected at least 1 trial (the baseline)")
        if accuracy_budget is not None and not accuracy_budget > 0:
            fail(f"--accuracy-budget {accuracy_budget}: expected a positive relative error")
        if strategy == "tpe":
            import importlib.util

            if importlib.util.find_spec("optuna") is None:
                fail("--strategy tpe needs optuna: pip install 'perf-suite[autotune]'")
        require_torch("autotune")
        with one_line_errors(Path(model)):
            from profiler.model.files import check_writable, write_atomic

            if plan_out is not None:
                check_writable(plan_out, force=force, inputs=[db])
            if runner_name == "inductor":
                doc, plan = _inductor(
                    model, precision or "fp32", budget, seed, strategy, db, resume, json, accuracy_budget
                )
                if plan_out is not None and plan is not None:
                    import orjson

                    write_atomic(plan_out, orjson.dumps(plan, option=orjson.OPT_INDENT_2) + b"\n", force=force)
            else:
                doc, plan = _simulator(
                    model, accel, precision or "bf16", budget, seed, strategy, db, resume, json, accuracy_budget,
                    plan_out, force,
                )  # fmt: skip
        if json:
            import orjson

            sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2) + b"\n")
            return
        _print_table(doc)
        if plan_out is not None and plan is not None:
            how = f"perf compile {model} {plan['flags']} --plan {plan_out}" if "flags" in plan else plan["usage"]
            print(f"plan: {plan_out} ({how})")


def _open_study(db: Path, study: Any, resume: bool, what: str) -> Any:
    """The trials database, refusing a run without --resume on a study it already holds."""
    from profiler.autotune.db import TrialDB
    from profiler.model.errors import InputError

    store = TrialDB(db)
    held = store.count(study)
    if held and not resume:
        store.close()
        raise InputError(db, f"holds {held} trials of this study ({what}); add --resume to continue it")
    return store


def _inductor(
    model: str, precision: str, budget: int, seed: int, strategy: str, db: Path, resume: bool, quiet: bool,
    accuracy_budget: float | None,
) -> tuple[dict, dict | None]:  # fmt: skip
    """The study of MODEL's Inductor options on this CPU -> (summary, best plan)."""
    from profiler.autotune.db import Study
    from profiler.autotune.inductor import InductorRunner, inductor_space, load_inductor_workload, plan_document
    from profiler.autotune.loop import best_trial, tune
    from profiler.autotune.report import summary
    from profiler.autotune.space import Candidate
    from profiler.autotune.strategy import make_strategy
    from profiler.cli.accel_compile import _model_and_inputs
    from profiler.model.errors import InputError

    m, xs = _model_and_inputs(model, [])
    if any(t.is_meta for t in (*m.parameters(), *m.buffers())):
        raise InputError(
            None, f"{model}: the Inductor runner runs the model; this model's weights are on the meta device"
        )
    try:
        w = load_inductor_workload(model, m, xs, precision)
    except ValueError as e:
        raise InputError(None, str(e)) from None
    space = inductor_space(model, precision)
    study = Study(w.hash, space.accel, InductorRunner.name, model)
    store = _open_study(db, study, resume, f"{model} with Inductor on {space.accel}")
    runner = InductorRunner(w, space, accuracy_budget)
    trials = tune(
        space, runner, make_strategy(strategy, space, seed), store, study, budget, seed,
        None if quiet else _progress(budget),
    )  # fmt: skip
    store.close()
    best = best_trial(trials)
    plan = plan_document(w, space, Candidate.from_json(best.candidate)) if best is not None else None
    return summary(space, trials, plan), plan


def _simulator(
    model: str, accel: str, precision: str, budget: int, seed: int, strategy: str, db: Path, resume: bool,
    quiet: bool, accuracy_budget: float | None, plan_out: Path | None, force: bool,
) -> tuple[dict, dict | None]:  # fmt: skip
    """The study of MODEL's compiler choices on the simulated accelerator -> (summary, best plan)."""
    from profiler import api
    from profiler.autotune.build import build_space, compile_candidate, load_workload, plan_document
    from profiler.autotune.db import Study
    from profiler.autotune.loop import best_trial, tune
    from profiler.autotune.report import summary
    from profiler.autotune.runner import SimulatorRunner
    from profiler.autotune.space import Candidate
    from profiler.autotune.strategy import make_strategy
    from profiler.cli.accel_compile import _model_and_inputs
    from profiler.model.errors import InputError
    from profiler.model.files import write_atomic

    hw = api.load_accel(accel)
    if precision not in api.accel_bounds:
        raise InputError(None, f"--precision {precision}: expected one of {', '.join(api.accel_bounds)}")
    m, xs = _model_and_inputs(model, [])
    if any(t.is_meta for t in (*m.parameters(), *m.buffers())):
        raise InputError(None, f"{model}: autotune checks every trial; this model's weights are on the meta device")
    w = load_workload(model, m, xs, hw, precision, accel)
    levers = ("tile", "fusion", "chips") + (("precision",) if accuracy_budget is not None else ())
    space = build_space(w, levers)
    study = Study(w.hash, hw.name, SimulatorRunner.name, model)
    store = _open_study(db, study, resume, f"{model} on {hw.name}")
    runner = SimulatorRunner(w, space, accuracy_budget)
    trials = tune(
        space, runner, make_strategy(strategy, space, seed, hw), store, study, budget, seed,
        None if quiet else _progress(budget),
    )  # fmt: skip
    store.close()
    best = best_trial(trials)
    plan = None
    if best is not None:
        c = Candidate.from_json(best.candidate)
        plan = plan_document(w, space, c, compile_candidate(w, space, c))
        if plan_out is not None:
            import orjson

            write_atomic(plan_out, orjson.dumps(plan, option=orjson.OPT_INDENT_2) + b"\n", force=force)
    return summary(space, trials, plan), plan


register(app)
