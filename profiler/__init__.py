"""perf: a performance profiling and bottleneck analysis suite for ML compilers and accelerators.

This package imports only the model's error; `Trace`, `Kind`, `Problems`, `load_trace` and
`analyze` are resolved on first use, so that `analysis` and `collectors` can import the model
without cycles and `perf --help` does not wait for pandas.
"""

from __future__ import annotations

from typing import Any

from profiler.model.errors import InputError

__version__ = "0.1.0"
__all__ = ["InputError", "Kind", "Problems", "Trace", "analyze", "load_trace"]


def __getattr__(name: str) -> Any:
    if name == "Kind":
        from profiler.model.schema import Kind

        return Kind
    if name in ("Problems", "Trace"):
        from profiler.model import trace

        return getattr(trace, name)
    if name in ("load_trace", "analyze"):
        from profiler import api

        return getattr(api, name)
    if name in ("profile", "step"):  # the live collector (imports torch, an optional extra): only when asked for
        try:
            from collectors.torch_runtime import session
        except ModuleNotFoundError as e:
            if e.name != "torch":
                raise
            raise ModuleNotFoundError(
                f"profiler.{name} needs torch: pip install 'perf-suite[profile]'", name="torch"
            ) from None

        if name == "step":
            return session.step
        from functools import partial, update_wrapper

        from profiler.api import analyze

        return update_wrapper(partial(session.profile, analyzer=analyze), session.profile)
    raise AttributeError(name)
