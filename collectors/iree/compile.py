"""Compile captured IR with iree-compile for the local CPU, timing every pass and dumping the
dispatch regions' executables (docs/iree.md).

Flags: the llvm-cpu backend on the host CPU; `--mlir-timing --mlir-timing-display=tree
--mlir-output-format=json` (the pass tree, on stderr); `--mlir-disable-threading` so a pass's wall
time is its own (with worker threads, nested pipelines are timed per thread and outgrow their
parent); `--mlir-print-debuginfo` so the dumped executables keep source locations;
`--iree-hal-dump-executable-files-to` (one source per dispatch). `compile_ns` is the wall time of
the iree-compile process as this process measured it; the pass tree's Total is the compiler's own.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from collectors.iree.passes import PassTree, pass_tree
from profiler.model.errors import InputError

TARGET_FLAGS = (
    "--iree-input-type=torch",
    "--iree-hal-target-device=local",
    "--iree-hal-local-target-device-backends=llvm-cpu",
    "--iree-llvmcpu-target-cpu=host",
)
TIMING_FLAGS = (
    "--mlir-timing",
    "--mlir-timing-display=tree",
    "--mlir-output-format=json",
    "--mlir-disable-threading",
    "--mlir-print-debuginfo",
)


@dataclass(frozen=True)
class Compiled:
    """One compile: `vmfb` (the module), `dumps` (the executable files), `passes` (the pass tree),
    `start_ns` (time.time_ns at launch) and `compile_ns` (the process's wall time, ns)."""

    vmfb: Path
    dumps: Path
    passes: PassTree
    start_ns: int
    compile_ns: int


def iree_compile_tool() -> str:
    """The iree-compile executable of the installed iree-base-compiler."""
    from iree.compiler.tools.binaries import find_tool

    return find_tool("iree-compile")


def compile_module(mlir: Path, workdir: Path, extra_flags: tuple[str, ...] = (), timeout_s: float = 600) -> Compiled:
    """iree-compile `mlir` into `workdir/model.vmfb` (module docstring). InputError with the
    compiler's first error line when it fails or its timing cannot be read."""
    dumps = workdir / "executables"
    shutil.rmtree(dumps, ignore_errors=True)
    vmfb = workdir / "model.vmfb"
    cmd = [
        iree_compile_tool(),
        str(mlir),
        *TARGET_FLAGS,
        *TIMING_FLAGS,
        f"--iree-hal-dump-executable-files-to={dumps}",
        *extra_flags,
        "-o",
        str(vmfb),
    ]
    start = time.time_ns()
    t0 = time.perf_counter_ns()
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise InputError(mlir, f"iree-compile ran past {timeout_s:.0f} s") from None
    wall = time.perf_counter_ns() - t0
    if run.returncode != 0:
        raise InputError(mlir, f"iree-compile failed: {first_error(run.stderr)}")
    try:
        tree = pass_tree(_timing_json(run.stderr))
    except ValueError as e:
        raise InputError(mlir, f"cannot read iree-compile's pass timing: {e}") from None
    return Compiled(vmfb, dumps, tree, start, wall)


def first_error(stderr: str) -> str:
    """The compiler's first `error:` line (location prefix kept), else its first non-empty line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        if re.search(r"\berror:", ln):
            return ln
    return lines[0] if lines else "(no message)"


def _timing_json(stderr: str) -> list:
    """The timing report: the JSON list iree-compile writes to stderr after its other messages."""
    start = stderr.find("[\n{")
    if start < 0:
        start = stderr.find("[")
    if start < 0:
        raise ValueError("no timing report on stderr")
    try:
        return json.loads(stderr[start:])
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e})") from None
