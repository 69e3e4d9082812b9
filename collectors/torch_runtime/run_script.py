"""`perf profile script.py [args...]`: run a Python script in this process under torch.profiler.

The script runs as `python script.py args...` would run it (runpy as __main__, sys.argv set, its
folder first on sys.path). It marks steps with `profiler.step()` (a no-op when not profiled), and
labels regions with `torch.profiler.record_function`; see docs/profile.md.
"""

from __future__ import annotations

import contextlib
import runpy
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path

from collectors.torch_runtime.run_model import compile_log
from collectors.torch_runtime.session import Session
from collectors.torch_runtime.specs import one_line
from profiler.model.errors import InputError


def run_script(
    script: Path,
    args: list[str],
    out: Path,
    *,
    active: int | None = None,
    wait: int = 0,
    warmup: int = 1,
    with_stack: bool = False,
    with_modules: bool = False,
    stdout_to_stderr: bool = False,
) -> Session:
    """Profile one run of `script`; the trace is written to `out`. Returns the finished Session.

    Without `active` the whole run is recorded; with it, schedule(wait, warmup, active) counts the
    script's step() marks. A script that raises (or exits non-zero) -> InputError naming the
    script, the exception and its line, and where the partial trace went.
    """
    script = Path(script)
    if not script.is_file():
        raise InputError(script, "no such script" if not script.exists() else "not a file")
    session = Session(out, steps=active, wait=wait, warmup=warmup, with_stack=with_stack, with_modules=with_modules)
    failure: BaseException | None = None
    with (
        _as_main(script, args),
        contextlib.redirect_stdout(sys.stderr) if stdout_to_stderr else contextlib.nullcontext(),
    ):
        try:
            with compile_log() as log, session:  # a script that calls torch.compile: its passes join the trace
                runpy.run_path(str(script), run_name="__main__")
        except SystemExit as e:
            if e.code not in (0, None):
                failure = e
        except Exception as e:  # noqa: BLE001 - the script's own error, reported in one line
            failure = e
    if failure is not None:
        raise InputError(script, _describe(failure, script) + "; " + _partial(session))
    if not session.written:
        raise InputError(script, session.why_empty())
    from collectors.torch_compile.embed import attach

    session.compile = attach(session.path, log)
    return session


def _describe(e: BaseException, script: Path) -> str:
    """`ZeroDivisionError: division by zero (line 7)`: the script's last line on the stack."""
    if isinstance(e, SystemExit):
        return f"exited with status {e.code}"
    line = None
    target = script.resolve()
    for frame in traceback.extract_tb(e.__traceback__):
        if Path(frame.filename).resolve() == target:
            line = frame.lineno
    return one_line(e) + (f" (line {line})" if line else "")


def _partial(session: Session) -> str:
    return f"partial trace written to {session.path}" if session.written else "no trace written"


@contextlib.contextmanager
def _as_main(script: Path, args: list[str]) -> Iterator[None]:
    """sys.argv and sys.path[0] as `python script.py args...` sets them; restored afterwards."""
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [str(script), *args]
    sys.path.insert(0, str(script.resolve().parent))
    try:
        yield
    finally:
        sys.argv = saved_argv
        sys.path[:] = saved_path
