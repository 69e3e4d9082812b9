"""Demangle C++ symbol names (Itanium ABI, `_Z...`): `demangle`, `demangle_many`.

CUDA traces carry kernel names already demangled (CUPTI does it when recording:
`void at::native::vectorized_elementwise_kernel<4, ...>(...)`); ROCm/HIP traces carry them
mangled (`_ZN5aiter24add_rmsnorm_quant_kernelI...`). To show both alike, names are demangled by
`c++filt` (binutils, or `llvm-cxxfilt`), one process for a whole table of names; where neither
is installed, by the C++ runtime's `abi::__cxa_demangle` through ctypes (older runtimes do not
know every newer type, e.g. `DF16b`, std::bfloat16_t). A name that does not demangle is shown
as recorded. No new dependency.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import shutil
import subprocess
from collections.abc import Iterable

__all__ = ["demangle", "demangle_many"]

_MAX_LEN = 65536
_done: dict[str, str] = {}  # mangled -> demangled, for the life of the process (names repeat)


def demangle(name: str) -> str:
    """`name` demangled when it is an Itanium C++ symbol (`_Z...`), else `name` unchanged."""
    return demangle_many([name])[0]


def demangle_many(names: Iterable[str]) -> list[str]:
    """Each name demangled (see `demangle`); the mangled ones not seen before in one c++filt run."""
    names = [str(n) for n in names]
    todo = sorted({n for n in names if n.startswith("_Z") and len(n) < _MAX_LEN and "\n" not in n and n not in _done})
    if todo:
        found = _cxxfilt(todo)
        for n in todo:
            out = found.get(n) or _cxa(n)
            _done[n] = out if out and not out.startswith("_Z") else n
    return [_done.get(n, n) for n in names]


def _cxxfilt(names: list[str]) -> dict[str, str]:
    tool = shutil.which("c++filt") or shutil.which("llvm-cxxfilt")
    if tool is None:
        return {}
    try:
        r = subprocess.run(
            [tool], input="\n".join(names) + "\n", capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    lines = r.stdout.splitlines()
    return dict(zip(names, lines)) if r.returncode == 0 and len(lines) == len(names) else {}


@functools.cache
def _runtime():  # noqa: ANN202 - (__cxa_demangle, free) from the C++ runtime, or None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
    libc.free.argtypes = [ctypes.c_void_p]
    for lib in ("stdc++", "c++"):
        path = ctypes.util.find_library(lib)
        try:
            fn = ctypes.CDLL(path).__cxa_demangle if path else None
        except (OSError, AttributeError):
            fn = None
        if fn is not None:
            fn.restype = ctypes.c_void_p  # a malloc'd buffer, freed after reading
            fn.argtypes = [
                ctypes.c_char_p,
                ctypes.c_char_p,
                ctypes.POINTER(ctypes.c_size_t),
                ctypes.POINTER(ctypes.c_int),
            ]
            return fn, libc.free
    return None


def _cxa(name: str) -> str | None:
    rt = _runtime()
    if rt is None:
        return None
    fn, free = rt
    status = ctypes.c_int(0)
    out = fn(name.encode("utf-8", "replace"), None, None, ctypes.byref(status))
    if not out:
        return None
    try:
        return ctypes.string_at(out).decode("utf-8", "replace") if status.value == 0 else None
    finally:
        free(out)
