"""Device labels of the events table: what kind of processor ran a row's work.

    'cpu'        host threads (ops, annotations, the runtime's launches)
    'gpu<N>'     accelerator N, a GPU (Kineto's device work: kernels, copies)
    'npu<N>'     chip N of a simulated accelerator (accelerator/sim)
    'cpu<N>'     a CPU running device work: a compiler runtime's dispatches on the host's cores
                 (IREE's llvm-cpu backend on its local-task device, collectors/iree), floored on
                 a CPU spec rather than a GPU's

A trace file marks a device as a CPU with `"deviceType": "cpu"` in its `deviceProperties`
entry; the others follow from the file (Kineto: 'gpu'; `traceSource: simulator`: 'npu').
"""

from __future__ import annotations

import re

HOST = "cpu"
#: label prefix -> the HardwareSpec kind whose numbers floor it
DEVICE_PREFIXES = {"gpu": "gpu", "npu": "npu", "cpu": "cpu"}
_LABEL = re.compile(r"(gpu|npu|cpu)(\d+)")


def device_label(prefix: str, index: int) -> str:
    """'gpu0', 'cpu0', ...: device `index` of kind `prefix` (one of DEVICE_PREFIXES)."""
    if prefix not in DEVICE_PREFIXES:
        raise ValueError(f"unknown device prefix {prefix!r}")
    return f"{prefix}{index}"


def device_kind(device: str) -> str:
    """'host' for the host threads ('cpu'), else the spec kind of a device label ('gpu', 'npu',
    'cpu' for 'cpu<N>'); '' for a label of no known form."""
    if device == HOST:
        return "host"
    m = _LABEL.fullmatch(device)
    return DEVICE_PREFIXES[m[1]] if m else ""


def device_index(device: str) -> int | None:
    """N of 'gpu<N>' / 'npu<N>' / 'cpu<N>'; None for the host and other labels."""
    m = _LABEL.fullmatch(device)
    return int(m[2]) if m else None


def runs_on_cpu(device: str) -> bool:
    """True for the host threads and for a CPU running device work ('cpu', 'cpu<N>'): both are
    floored on the CPU's spec."""
    return device_kind(device) in ("host", "cpu")
