"""`perf profile --model pkg.module:factory --input 32x256`: profile N steps of a model.

The steps, in order (one `ProfilerStep#k` label each, via torch.profiler.schedule):

    warmup steps  schedule 'wait': profiler off. torch.compile compiles here (the first call),
                  for forward and, with --backward, backward.
    1 step        schedule 'warmup': traced and thrown away (the first traced step carries
                  the profiler's own start-up cost).
    N steps       schedule 'active': recorded.

With --compile, one eager forward runs first (unprofiled) so that a broken model or a wrong
input shape is reported as such, not as a compile failure.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

from collectors.torch_runtime.session import Session
from collectors.torch_runtime.specs import InputSpec, load_factory, one_line, parse_dtype, parse_input
from profiler.model.errors import InputError


def run_model(
    spec: str,
    inputs: list[str],
    out: Path,
    *,
    dtype: str = "fp32",
    compile: bool = False,
    steps: int = 3,
    warmup: int = 1,
    backward: bool = False,
    with_stack: bool = False,
    with_modules: bool = False,
) -> Session:
    """Build the model from its factory, make random inputs, profile `steps` steps into `out`."""
    if steps < 1 or warmup < 0:
        raise InputError(None, f"--steps {steps} --warmup {warmup}: need steps >= 1 and warmup >= 0")
    model, xs = prepare(spec, inputs, dtype, backward, eager_check=compile)
    fn = torch.compile(model) if compile else model
    session = Session(out, steps=steps, wait=warmup, warmup=1, with_stack=with_stack, with_modules=with_modules)
    done = 0
    try:
        with compile_log(compile) as log, session:
            for _ in range(warmup + 1 + steps):
                run_step(fn, model, xs, backward)
                session.step()
                done += 1
        if log is not None and session.written:  # the compile passes and tables go into the trace file
            from collectors.torch_compile.embed import attach

            session.compile = attach(session.path, log)
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's model or the compiler: anything, reported in one line
        phase = (
            f"warm-up step {done + 1} of {warmup}"
            if done < warmup
            else "the profiler's warm-up step"
            if done == warmup
            else f"recorded step {done - warmup} of {steps}"
        )
        what = ("torch.compile failed" if compile and _from_compiler(e) else "the model raised") + f" in {phase}"
        hint = (
            "; rerun without --compile to profile it eagerly"
            if compile and _from_compiler(e) and not session.written
            else ""
        )
        where = f"partial trace written to {session.path}" if session.written else "no trace written"
        raise InputError(None, f"--model {spec}: {what}: {one_line(e)}; {where}{hint}") from None
    return session


def compile_log(on: bool = True) -> AbstractContextManager[Any]:
    """The structured log of torch.compile while inside (collectors.torch_compile.embed.capturing), or None when off."""
    if not on:
        return nullcontext(None)
    from collectors.torch_compile.embed import capturing

    return capturing()


def run_step(fn: Any, model: torch.nn.Module, xs: list[torch.Tensor], backward: bool) -> None:
    """One forward (and backward of the sum of the first floating output, gradients then dropped)."""
    if not backward:
        with torch.no_grad(), torch.profiler.record_function("forward"):
            fn(*xs)
        return
    with torch.profiler.record_function("forward"):
        out = fn(*xs)
    loss = next((t for t in tree_leaves(out) if isinstance(t, torch.Tensor) and t.requires_grad), None)
    if loss is None:
        raise InputError(None, "--backward: no model output requires grad")
    with torch.profiler.record_function("backward"):
        loss.sum().backward()
    model.zero_grad(set_to_none=True)


def prepare(
    spec: str, inputs: list[str], dtype: str = "fp32", backward: bool = False, *, eager_check: bool = True
) -> tuple[torch.nn.Module, list[torch.Tensor]]:
    """The model from its factory and random inputs (seeded: the same every run). With
    `eager_check`, one eager step first, so model and input errors are not blamed on a compiler."""
    if not inputs:
        raise InputError(
            None, f"--model {spec}: give the model's inputs with --input SHAPE (repeatable), e.g. --input 32x256"
        )
    specs = [parse_input(s) for s in inputs]
    float_dtype = parse_dtype(dtype)
    factory = load_factory(spec)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    model = _build(factory, spec).to(device=device, dtype=float_dtype).train(backward)
    xs = make_inputs(specs, model, float_dtype, device)
    if eager_check:
        _eager_check(model, xs, spec, backward)
    return model, xs


def make_inputs(
    specs: list[InputSpec], model: torch.nn.Module, float_dtype: torch.dtype, device: torch.device
) -> list[torch.Tensor]:
    """Random inputs: floats ~ N(0, 1) in `float_dtype` (or the spec's); integers uniform in
    [0, high), high = the spec's bound, else the smallest nn.Embedding's num_embeddings, else 2."""
    vocab = min((m.num_embeddings for m in model.modules() if isinstance(m, torch.nn.Embedding)), default=2)
    out = []
    for s in specs:
        dt = s.dtype or float_dtype
        try:
            if dt == torch.bool:
                out.append(torch.randint(0, 2, s.shape, device=device).bool())
            elif dt.is_floating_point:
                out.append(torch.randn(s.shape, dtype=dt, device=device))
            else:
                out.append(torch.randint(0, s.high or vocab, s.shape, dtype=dt, device=device))
        except (RuntimeError, MemoryError) as e:
            raise InputError(
                None, f"--input {'x'.join(map(str, s.shape))}: cannot allocate it: {one_line(e)}"
            ) from None
    return out


def _build(factory: Any, spec: str) -> torch.nn.Module:
    try:
        model = factory()
    except Exception as e:  # noqa: BLE001 - user code
        raise InputError(None, f"--model {spec}: the factory raised {one_line(e)}") from None
    if not isinstance(model, torch.nn.Module):
        raise InputError(None, f"--model {spec}: the factory returned a {type(model).__name__}, not a torch.nn.Module")
    return model


def _eager_check(model: torch.nn.Module, xs: list[torch.Tensor], spec: str, backward: bool) -> None:
    """One eager step, so model and input errors are not blamed on the compiler."""
    try:
        run_step(model, model, xs, backward)
    except InputError:
        raise
    except Exception as e:  # noqa: BLE001 - user code
        raise InputError(
            None, f"--model {spec}: the model raised (eager, before compiling): {one_line(e)}; no trace written"
        ) from None


def _from_compiler(e: BaseException) -> bool:
    """Raised by Dynamo, AOTAutograd or Inductor (its class lives in their modules)."""
    return any(
        c.__module__.startswith(("torch._dynamo", "torch._inductor", "torch._functorch")) for c in type(e).__mro__
    )
