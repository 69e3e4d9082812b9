"""The dispatch regions iree-compile formed, read back from the executables it dumped
(`--iree-hal-dump-executable-files-to`, `module_<func>$async_dispatch_<n>.mlir`, one per dispatch).

Per dispatch: its export name (the name the runtime profiler reports), its bindings (the
buffers it reads and writes, with shapes and element types), and the linalg ops fused into it
with their operand shapes, loop sizes, reduction loops, the float arithmetic per loop iteration
and the source locations (module path, file:line) of the PyTorch ops they came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

_EXPORT = re.compile(r"hal\.executable\.export public @([\w$.-]+)")
_BINDING = re.compile(r"dispatch\.tensor<(readonly|writeonly|readwrite):tensor<([^>]*)>>")
_OP = re.compile(r"=\s*((?:linalg|iree_linalg_ext)\.(\w+))\b")
_INS = re.compile(r"\bins\(([^)]*)\)")
_OUTS = re.compile(r"\bouts\(([^)]*)\)")
_TENSOR = re.compile(r"tensor<([^>]*)>")
_MAPS = re.compile(r"affine_map<\(([^)]*)\)\s*->\s*\(([^)]*)\)>")
_ITERS = re.compile(r"iterator_types\s*=\s*\[([^\]]*)\]")
#: name location around a file location: "fc1"("model.py":8:0) or "fc1"(callsite("model.py":8:0 at ...))
_NAMED_LOC = re.compile(r'"([^"]+)"\((?:callsite\()?"([^"]+)":(\d+):\d+')
_FILE_LOC = re.compile(r'loc\((?:callsite\()?"([^"]+)":(\d+):\d+')
#: float arithmetic counted as FLOPs in a region body (compares and selects are not: relu is 0 FLOPs,
#: as torch.utils.flop_counter counts it)
_FLOP_OPS = re.compile(r"\b(arith\.(?:addf|subf|mulf|divf|maximumf|minimumf|maxnumf|minnumf|negf|remf)|math\.\w+)\b")
_NO_MODULE = "<top>"
#: IREE's fused attention ops (Q, K, V -> O, softmax inside): costed from their loop roles
_ATTENTION_OPS = ("attention", "online_attention")

#: default indexing maps of named ops that print none: loop dims of each operand (ins..., out)
_NAMED_MAPS = {
    "matmul": [["d0", "d2"], ["d2", "d1"], ["d0", "d1"]],
    "matmul_transpose_b": [["d0", "d2"], ["d1", "d2"], ["d0", "d1"]],
    "batch_matmul": [["d0", "d1", "d3"], ["d0", "d3", "d2"], ["d0", "d1", "d2"]],
    "batch_matmul_transpose_b": [["d0", "d1", "d3"], ["d0", "d2", "d3"], ["d0", "d1", "d2"]],
}
_NAMED_REDUCTIONS = {
    "softmax": 1,
    "matmul": 1,
    "matmul_transpose_b": 1,
    "batch_matmul": 1,
    "batch_matmul_transpose_b": 1,
}
#: softmax per element: the max, the subtraction, exp, the sum and the division (5, as its
#: decomposition into linalg.generic ops counts them)
_NAMED_BODY_FLOPS = {
    "softmax": 5,
    "matmul": 2,
    "matmul_transpose_b": 2,
    "batch_matmul": 2,
    "batch_matmul_transpose_b": 2,
}

OP_COLUMNS = [
    "dispatch",  # export name, as the runtime reports it
    "op",  # linalg.matmul, linalg.generic, ...
    "inputs",  # operand types, e.g. '16x64xf32,128x64xf32'
    "output",  # result type, e.g. '16x128xf32'
    "element",  # element type of the first input (f32, f16, bf16, ...)
    "loops",  # loop sizes, 'x'-joined in loop order (d0, d1, ...)
    "iterations",  # product of the loop sizes
    "reductions",  # reduction loops
    "body_flops",  # float arithmetic per iteration (named contractions: 2, a multiply and an add)
    "attention",  # iree_linalg_ext.attention: 'BH x Sq x Sk x Dqk x Dv' loop sizes by role, else ''
    "locations",  # 'module file:line' of the PyTorch ops, ';'-joined
]


@dataclass(frozen=True)
class Dispatch:
    """One dispatch region: `name`, `bytes_read` / `bytes_written` (its bindings' sizes, bytes),
    `source` (the dumped file), `locations` (distinct 'module file:line', first seen first)."""

    name: str
    bytes_read: int
    bytes_written: int
    source: Path
    locations: tuple[str, ...]


def dispatch_files(dumps: Path) -> list[Path]:
    """The per-dispatch executable sources in a dump folder, in dispatch order."""
    files = [
        p
        for p in dumps.glob("module_*dispatch_*.mlir")
        if not p.name.endswith("_benchmark.mlir") and not p.name.startswith("configured_")
    ]
    return sorted(files, key=lambda p: int(re.findall(r"dispatch_(\d+)", p.name)[-1]))


def read_dispatches(dumps: Path, model_files: tuple[str, ...] = ()) -> tuple[list[Dispatch], pd.DataFrame]:
    """(dispatches, linalg ops: OP_COLUMNS) of the executables in `dumps`. Locations keep frames
    in `model_files` when given (the model's own source), else every frame outside site-packages."""
    out, rows = [], []
    for path in dispatch_files(dumps):
        text = path.read_text(errors="replace")
        m = _EXPORT.search(text)
        if m is None:
            continue
        name = m[1]
        read = written = 0
        subspans = "\n".join(ln for ln in text.splitlines() if "hal.interface.binding.subspan" in ln)
        for access, ttype in _BINDING.findall(subspans):  # one per binding (loads and stores repeat the type)
            size = tensor_bytes(ttype)
            if access in ("readonly", "readwrite"):
                read += size
            if access in ("writeonly", "readwrite"):
                written += size
        ops = _linalg_ops(text, model_files)
        rows += [[name, *op] for op in ops]
        locs = tuple(dict.fromkeys(loc for op in ops for loc in op[-1].split(";") if loc))
        out.append(Dispatch(name, read, written, path, locs))
    return out, pd.DataFrame(rows, columns=OP_COLUMNS)


def tensor_bytes(ttype: str) -> int:
    """Bytes of a tensor type body '16x128xf32' (i1 counted as one byte; dynamic dims as 0)."""
    *dims, elem = ttype.split("x")
    n = 1
    for d in dims:
        n *= int(d) if d.isdigit() else 0
    bits = int(re.sub(r"\D", "", elem) or 8)
    return n * max(bits, 8) // 8


def _linalg_ops(text: str, model_files: tuple[str, ...]) -> list[list]:
    lines = text.splitlines()
    ops = []
    for i, line in enumerate(lines):
        m = _OP.search(line)
        if m is None or m[2] in ("yield", "index"):
            continue
        full, kind = m[1], m[2]
        ins_m, outs_m = _INS.search(line), _OUTS.search(line)
        ins = _TENSOR.findall(ins_m[1]) if ins_m else []
        outs = _TENSOR.findall(outs_m[1]) if outs_m else []
        body, end = _region(lines, i)
        loc_text = lines[end]
        maps = [[e.strip() for e in res.split(",") if e.strip()] for _, res in _MAPS.findall(line)]
        iters = _ITERS.search(line)
        reductions = iters[1].count("reduction") if iters else _NAMED_REDUCTIONS.get(kind, 0)
        maps = maps or _NAMED_MAPS.get(kind, [])
        loops = _loop_sizes(maps, ins + outs) if maps else _dims(outs[0] if outs else (ins[0] if ins else ""))
        body_flops = len(_FLOP_OPS.findall(body)) if body else _NAMED_BODY_FLOPS.get(kind, 0)
        roles = _attention_roles(maps, loops) if kind in _ATTENTION_OPS else ""
        if kind in _ATTENTION_OPS:
            body_flops = 0  # its region only rescales a score (identity here): costed from `roles`
        iterations = 1
        for n in loops:
            iterations *= n
        element = (ins or outs or ["f32"])[0].split("x")[-1]
        ops.append(
            [
                full,
                ",".join(ins),
                ",".join(outs),
                element,
                "x".join(map(str, loops)),
                iterations,
                reductions,
                body_flops,
                roles,
                ";".join(_locations(loc_text, model_files)),
            ]
        )
    return ops


def _attention_roles(maps: list[list[str]], loops: list[int]) -> str:
    """'BHxSqxSkxDqkxDv' of an attention op from its indexing maps (Q, K, V, scale, [mask,] out):
    Dqk indexes Q and K, not the output; Sk indexes K and V, not Q; Sq indexes Q and the output,
    not K; Dv indexes V and the output, not Q; the batch loops (batch, heads) all four."""
    sets = [{e for e in m if re.fullmatch(r"d\d+", e)} for m in maps if m]
    if len(sets) < 4:
        return ""
    q, k, v, out = sets[0], sets[1], sets[2], sets[-1]
    size = {f"d{i}": n for i, n in enumerate(loops)}

    def prod(dims: set[str]) -> int:
        n = 1
        for d in dims:
            n *= size.get(d, 0)
        return n

    return "x".join(
        str(prod(dims)) for dims in (q & k & v & out, (q & out) - k, (k & v) - q, (q & k) - out, (v & out) - q)
    )


def _region(lines: list[str], i: int) -> tuple[str, int]:
    """(the op's region body, the line index holding its location): ops with a region end at the
    brace that closes it ('} -> tensor<...> loc(...)')."""
    if not lines[i].rstrip().endswith("{"):
        return "", i
    depth = 0
    for j in range(i, len(lines)):
        depth += lines[j].count("{") - lines[j].count("}")
        if depth <= 0:
            return "\n".join(lines[i + 1 : j]), j
    return "\n".join(lines[i + 1 :]), len(lines) - 1


def _dims(ttype: str) -> list[int]:
    return [int(d) for d in ttype.split("x")[:-1] if d.isdigit()]


def _loop_sizes(maps: list[list[str]], operands: list[str]) -> list[int]:
    """Loop sizes from the indexing maps and operand shapes: loop dN's size is the extent of the
    first operand dimension it indexes directly."""
    sizes: dict[int, int] = {}
    if len(maps) > len(operands):  # a scalar operand (attention's scale) has the map '()' and no tensor type
        maps = [m for m in maps if m]
    for exprs, ttype in zip(maps, operands):
        for e, n in zip(exprs, _dims(ttype)):
            if re.fullmatch(r"d\d+", e):
                sizes.setdefault(int(e[1:]), n)
    return [sizes[k] for k in sorted(sizes)]


def _locations(text: str, model_files: tuple[str, ...]) -> list[str]:
    """'module file:line' of each frame in `text` that is the model's (module docstring)."""
    found = [(mod, f, int(ln)) for mod, f, ln in _NAMED_LOC.findall(text)]
    found += [(_NO_MODULE, f, int(ln)) for f, ln in _FILE_LOC.findall(text)]
    keep = []
    for mod, f, ln in found:
        if model_files and not any(f == m or f.endswith("/" + m) for m in model_files):
            continue
        if not model_files and "site-packages" in f:
            continue
        keep.append(f"{mod} {f}:{ln}")
    return list(dict.fromkeys(keep))
