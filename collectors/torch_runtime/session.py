"""A live torch.profiler run: `profile(...)` as a context manager, steps marked by `step()`.

    with profile(steps=3) as p:          # or profiler.profile(...) from a notebook
        for batch in data:
            train_step(batch)
            p.step()                     # or profiler.step(): marks the active session's step
    p.path, p.trace, p.analysis()

Steps. `steps=None` records the whole block; each `step()` still opens a new `ProfilerStep#N`
label, so without marks the block is one region (ProfilerStep#0). `steps=N` follows
torch.profiler.schedule(wait, warmup, active=N, repeat=1): the first `wait` marked steps run
unprofiled, the next `warmup` are traced and discarded, the next N are recorded. Leaving the
block early (an exception) still writes whatever the active window recorded.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal, Self

import torch
from torch.profiler import ProfilerAction, ProfilerActivity

from collectors.torch_runtime.native import NESTED, filtered_stderr, refuse_nested_profilers
from profiler.model.errors import InputError
from profiler.model.files import atomic_path
from profiler.model.trace import Trace

_active: Session | None = None


def default_activities() -> list[ProfilerActivity]:
    """CPU always; CUDA when this process can see a GPU."""
    return [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])


def activities_from(names: Iterable[str | ProfilerActivity] | None) -> list[ProfilerActivity]:
    """ProfilerActivity values from names ('cpu', 'cuda', ...) or the values themselves."""
    if names is None:
        return default_activities()
    out = []
    for a in names:
        if isinstance(a, ProfilerActivity):
            out.append(a)
            continue
        try:
            out.append(ProfilerActivity.__members__[str(a).upper()])
        except KeyError:
            raise InputError(
                None, f"activity {a!r}: expected one of {', '.join(n.lower() for n in ProfilerActivity.__members__)}"
            ) from None
    return out


def _record_everything(_step: int) -> ProfilerAction:
    """Schedule that records from start to stop: a schedule at all makes torch label each step."""
    return ProfilerAction.RECORD


class Session:
    """One profiled region. `path` is where the trace goes (Chrome JSON; gzip when it ends in .gz)."""

    def __init__(
        self,
        path: Path,
        *,
        steps: int | None = None,
        wait: int = 0,
        warmup: int = 1,
        activities: Iterable[str | ProfilerActivity] | None = None,
        record_shapes: bool = True,
        with_stack: bool = False,
        with_modules: bool = False,
        analyzer: Callable[..., Any] | None = None,
        capture_compile: bool = False,
    ) -> None:
        if steps is not None and (steps < 1 or wait < 0 or warmup < 0):
            raise InputError(
                None, f"steps={steps}, wait={wait}, warmup={warmup}: need steps >= 1, wait and warmup >= 0"
            )
        self.path = Path(path)
        self.steps, self.wait, self.warmup = steps, wait, warmup
        self.activities = activities_from(activities)
        self.record_shapes, self.with_stack, self.with_modules = record_shapes, with_stack, with_modules
        self.marks = 0  # step() calls so far
        self.written = False  # the trace file holds this session's recording
        self.compile: Any = None  # CompileReport of the torch.compile runs, when perf profile captured some
        self._analyzer = analyzer
        self._prof: torch.profiler.profile | None = None
        self._trace: Trace | None = None
        self._guard: Any = None
        self._capture_compile = capture_compile  # torch.compile's passes and tables join the trace
        self._compile_ctx: Any = None
        self._compile_log: Any = None

    # -- the region ---------------------------------------------------------------------------
    def __enter__(self) -> Self:
        global _active
        if _active is not None or torch.autograd._profiler_enabled():  # someone else's profiler runs
            raise RuntimeError(NESTED)
        if not self.path.parent.is_dir():
            raise InputError(self.path, "the output directory does not exist")
        sched = (
            _record_everything
            if self.steps is None
            else torch.profiler.schedule(wait=self.wait, warmup=self.warmup, active=self.steps, repeat=1)
        )
        self._prof = torch.profiler.profile(
            activities=self.activities,
            schedule=sched,
            on_trace_ready=self._export,
            record_shapes=self.record_shapes,
            with_stack=self.with_stack,
            with_modules=self.with_modules,
        )
        with filtered_stderr():
            self._prof.start()
        self._guard = refuse_nested_profilers()
        self._guard.__enter__()
        if self._capture_compile:
            from collectors.torch_compile.embed import capturing

            self._compile_ctx = capturing()
            self._compile_log = self._compile_ctx.__enter__()
        _active = self
        return self

    def step(self) -> None:
        """Mark the end of one step (iteration) and the start of the next."""
        if self._prof is None or _active is not self:
            raise RuntimeError("step() outside the `with profile(...)` block")
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # a step's kernels finish inside its ProfilerStep window
        with filtered_stderr():
            self._prof.step()
        self.marks += 1

    def __exit__(self, *exc: object) -> Literal[False]:
        global _active
        _active = None
        if self._guard is not None:
            self._guard.__exit__(None, None, None)
            self._guard = None
        if self._prof is not None:
            if torch.cuda.is_available():
                try:
                    torch.cuda.synchronize()
                except RuntimeError:  # a sticky CUDA error (the one being raised): still save the trace
                    pass
            with filtered_stderr():
                self._prof.stop()
        if self._compile_ctx is not None:
            self._compile_ctx.__exit__(None, None, None)
            self._compile_ctx = None
            if self.written:
                from collectors.torch_compile.embed import attach

                self.compile = attach(self.path, self._compile_log)
                self._trace = None
        return False  # exceptions propagate; the partial trace is already written

    def _export(self, prof: torch.profiler.profile) -> None:
        # written beside the target and renamed: a kill or a full disk leaves the old file or none;
        # torch gzips when the name ends in .gz (export_chrome_trace), and the temporary name does
        with atomic_path(self.path, force=True) as tmp:
            prof.export_chrome_trace(str(tmp))
        self.written = True
        self._trace = None

    # -- results -----------------------------------------------------------------------------
    @property
    def trace(self) -> Trace:
        """The recording, loaded from `path` through the Kineto collector (cached)."""
        if not self.written:
            raise InputError(self.path, self.why_empty())
        if self._trace is None:
            from collectors.kineto import load_kineto

            self._trace = load_kineto(self.path)
        return self._trace

    def analysis(self, hardware: str | None = None, **kwargs: Any) -> Any:
        """profiler.api.analyze over `trace` (an Analysis); kwargs: top, dtype, sections, rank."""
        if self._analyzer is None:
            raise RuntimeError("no analyzer bound: use profiler.profile(...), which binds profiler.api.analyze")
        return self._analyzer(self.trace, hardware=hardware, **kwargs)

    @property
    def complete(self) -> bool:
        """Every scheduled step was marked (always true without a schedule)."""
        return self.steps is None or self.marks >= self.wait + self.warmup + self.steps

    def why_empty(self) -> str:
        """Why nothing was recorded, in one line."""
        if self.steps is None:
            return "no trace recorded"
        start = self.wait + self.warmup
        return (
            f"no trace recorded: the run ended after {self.marks} step() mark(s); with wait={self.wait}, "
            f"warmup={self.warmup} recording starts after mark {start}, "
            f"and steps={self.steps} needs {start + self.steps} marks"
        )


def profile(
    steps: int | None = None,
    *,
    wait: int = 0,
    warmup: int = 1,
    activities: Iterable[str | ProfilerActivity] | None = None,
    record_shapes: bool = True,
    with_stack: bool = False,
    with_modules: bool = False,
    out: str | Path | None = None,
    analyzer: Callable[..., Any] | None = None,
    capture_compile: bool = True,
) -> Session:
    """A profiling session for `with`: see the module docstring. `out` defaults to a new file in
    the temp directory (perf-*.json.gz); `analyzer` is what `Session.analysis` calls; with
    `capture_compile`, torch.compile's passes and tables inside the block join the trace
    (collectors.torch_compile.embed), as `perf profile` does."""
    if out is None:
        fd, name = tempfile.mkstemp(prefix="perf-", suffix=".json.gz")
        os.close(fd)
        os.unlink(name)  # only the name is wanted: the file appears when the trace is written
        out = name
    return Session(
        Path(out),
        steps=steps,
        wait=wait,
        warmup=warmup,
        activities=activities,
        record_shapes=record_shapes,
        with_stack=with_stack,
        with_modules=with_modules,
        analyzer=analyzer,
        capture_compile=capture_compile,
    )


def step() -> None:
    """Mark a step in the active session (perf profile or profiler.profile); without one, nothing."""
    if _active is not None:
        _active.step()


def active() -> Session | None:
    """The session now recording in this process, if any."""
    return _active
