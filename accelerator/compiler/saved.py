"""A compiled program on disk (`perf compile -o PROGRAM.json[.gz]`, read by `perf simulate`): one
JSON document, gzipped when the name ends in .gz, with everything timing needs and no weights.

    {"schema": "perf.accel_program", "version": 1,
     "name", "model", "hardware": {"name", "source"}, "precision", "chips",
     "inputs":  [{name, kind, target, type}],
     "ops":     [{name, target, args, kwargs, type, module, source, attrs}],
     "outputs": [{name, kind, target}],
     "kernels": [{name, ops, unit, inputs, outputs, tile, attrs}],
     "placement": {value: {level, offset, size, live: [first, last]}},
     "transfers": [{value, src, dst, bytes, before, after}],
     "shards":  {input: dim},
     "replicas": {input: chips holding each slice} (optional; absent in older files: none),
     "log":     [{name, wall_ns, ops_before, ops_after, kernels_before, kernels_after, skipped, decisions}]}

A `type` is {shape, dtype, hint} (a str in `shape` is a dynamic dim), or a list of them for an op
with several results. Values in args, kwargs and attrs are JSON's own (null, bools, ints, strs,
lists) except: a use of a value {"ref": name}, a tuple {"tuple": [...]}, a dict {"dict": {...}},
a torch dtype {"dtype": "bfloat16"}, a float that JSON cannot hold {"float": "nan"}, and
anything else {"repr": text}. An op with a `repr` argument is kept (its type and attrs time it)
but cannot be executed: the loaded op holds `Opaque(text)` there and `require_executable` refuses.
`log` keeps the compile log with each pass's decisions counted, not listed.

Not saved: the weights (`Program.state`), the example inputs, the torch.export program and the
block-reuse record (`repeat`): the loaded program has ops, types, kernels, placement and
transfers, and no tensors."""

from __future__ import annotations

import gzip
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from accelerator.compiler.pipeline import Compiled
from accelerator.compiler.program import Input, Kernel, Op, Output, Placement, Program, Ref, TensorType, Transfer
from profiler.model.errors import InputError

SCHEMA = "perf.accel_program"
VERSION = 1


@dataclass(frozen=True)
class Opaque:
    """An argument the file holds only as text (`repr`): the op can be timed, not executed."""

    repr: str


@dataclass(frozen=True)
class SavedProgram:
    """A loaded file: the program (no `state`), the hardware it was compiled for (`hardware` the
    preset's name, `hardware_source` what `--accel` named: a preset or a YAML path), the precision
    policy, the model name and the compile log (one dict per pass, `decisions` a count)."""

    program: Program
    hardware: str
    hardware_source: str
    precision: str
    model: str
    log: tuple[Mapping[str, Any], ...]


# -- values ------------------------------------------------------------------------------------


def _encode(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"float": repr(v)}
    if isinstance(v, Ref):
        return {"ref": v.name}
    if isinstance(v, Opaque):
        return {"repr": v.repr}
    if isinstance(v, tuple):
        return {"tuple": [_encode(x) for x in v]}
    if isinstance(v, list):  # torch.fx's immutable_list too
        return [_encode(x) for x in v]
    if isinstance(v, Mapping) and all(isinstance(k, str) for k in v):
        return {"dict": {k: _encode(x) for k, x in v.items()}}
    if type(v).__module__ == "torch" and type(v).__name__ == "dtype":
        return {"dtype": str(v).removeprefix("torch.")}
    return {"repr": repr(v)}


def _decode(v: Any) -> Any:
    if isinstance(v, list):
        return [_decode(x) for x in v]
    if not isinstance(v, dict):
        return v
    if len(v) != 1:
        raise ValueError(f"a tagged value has one key, not {sorted(v)}")
    ((tag, x),) = v.items()
    if tag == "ref":
        return Ref(_str(x))
    if tag == "tuple":
        return tuple(_decode(y) for y in _list(x))
    if tag == "dict":
        return {_str(k): _decode(y) for k, y in _map(x).items()}
    if tag == "float":
        return float(_str(x))
    if tag == "repr":
        return Opaque(_str(x))
    if tag == "dtype":
        import torch

        dtype = getattr(torch, _str(x), None)
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"{x!r} is not a torch dtype")
        return dtype
    raise ValueError(f"unknown value tag {tag!r}")


def _str(x: Any) -> str:
    if not isinstance(x, str):
        raise ValueError(f"expected a string, got {type(x).__name__}")
    return x


def _list(x: Any) -> list:
    if not isinstance(x, list):
        raise ValueError(f"expected a list, got {type(x).__name__}")
    return x


def _map(x: Any) -> dict:
    if not isinstance(x, dict):
        raise ValueError(f"expected an object, got {type(x).__name__}")
    return x


def _int(x: Any) -> int:
    if not isinstance(x, int) or isinstance(x, bool):
        raise ValueError(f"expected an integer, got {type(x).__name__}")
    return x


# -- records -----------------------------------------------------------------------------------


def _type_doc(t: TensorType | tuple[TensorType, ...]) -> Any:
    if isinstance(t, tuple):
        return [_type_doc(x) for x in t]
    return {"shape": list(t.shape), "dtype": t.dtype, "hint": list(t.hint)}


def _type(d: Any) -> TensorType | tuple[TensorType, ...]:
    if isinstance(d, list):
        return tuple(_type(x) for x in d)  # type: ignore[misc]
    d = _map(d)
    shape = tuple(x if isinstance(x, str) else _int(x) for x in _list(d["shape"]))
    return TensorType(shape, _str(d["dtype"]), tuple(_int(x) for x in _list(d["hint"])))


def to_document(
    program: Program, *, hardware_name: str, precision: str, hardware_source: str = "", model: str = "", log: Any = ()
) -> dict[str, Any]:
    """The document of the module docstring (`log`: PassLog rows)."""
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "name": program.name,
        "model": model,
        "hardware": {"name": hardware_name, "source": hardware_source or hardware_name},
        "precision": precision,
        "chips": program.chips,
        "inputs": [
            {"name": i.name, "kind": i.kind, "target": i.target, "type": _type_doc(i.type)} for i in program.inputs
        ],
        "ops": [
            {
                "name": o.name,
                "target": o.target,
                "args": [_encode(a) for a in o.args],
                "kwargs": {k: _encode(v) for k, v in o.kwargs.items()},
                "type": _type_doc(o.type),
                "module": o.module,
                "source": o.source,
                "attrs": {k: _encode(v) for k, v in o.attrs.items()},
            }
            for o in program.ops
        ],
        "outputs": [{"name": o.name, "kind": o.kind, "target": o.target} for o in program.outputs],
        "kernels": [
            {
                "name": k.name,
                "ops": list(k.ops),
                "unit": k.unit,
                "inputs": list(k.inputs),
                "outputs": list(k.outputs),
                "tile": dict(k.tile) if k.tile is not None else None,
                "attrs": {a: _encode(v) for a, v in k.attrs.items()},
            }
            for k in program.kernels
        ],
        "placement": {
            v: {"level": p.level, "offset": p.offset, "size": p.size, "live": list(p.live)}
            for v, p in program.placement.items()
        },
        "transfers": [
            {"value": t.value, "src": t.src, "dst": t.dst, "bytes": t.bytes, "before": t.before, "after": t.after}
            for t in program.transfers
        ],
        "shards": dict(program.shards),
        "replicas": dict(program.replicas),
        "log": [{**row.to_dict(), "decisions": len(row.decisions)} for row in log],
    }


def from_document(doc: Any) -> SavedProgram:
    """The program of a document; KeyError (a missing key) or ValueError (a malformed value)."""
    doc = _map(doc)
    program = Program(
        name=_str(doc["name"]),
        inputs=tuple(
            Input(_str(i["name"]), _str(i["kind"]), _str(i["target"]), _type(i["type"]))  # type: ignore[arg-type]
            for i in map(_map, _list(doc["inputs"]))
        ),
        ops=tuple(
            Op(
                name=_str(o["name"]),
                target=_str(o["target"]),
                args=tuple(_decode(a) for a in _list(o["args"])),
                kwargs={_str(k): _decode(v) for k, v in _map(o["kwargs"]).items()},
                type=_type(o["type"]),
                module=_str(o["module"]),
                source=_str(o["source"]),
                attrs={_str(k): _decode(v) for k, v in _map(o["attrs"]).items()},
            )
            for o in map(_map, _list(doc["ops"]))
        ),
        outputs=tuple(
            Output(_str(o["name"]), _str(o["kind"]), _str(o["target"])) for o in map(_map, _list(doc["outputs"]))
        ),
        state={},
        kernels=tuple(
            Kernel(
                name=_str(k["name"]),
                ops=tuple(map(_str, _list(k["ops"]))),
                unit=_str(k["unit"]),
                inputs=tuple(map(_str, _list(k["inputs"]))),
                outputs=tuple(map(_str, _list(k["outputs"]))),
                tile=None if k["tile"] is None else {_str(d): _int(n) for d, n in _map(k["tile"]).items()},
                attrs={_str(a): _decode(v) for a, v in _map(k["attrs"]).items()},
            )
            for k in map(_map, _list(doc["kernels"]))
        ),
        placement={
            _str(v): Placement(_str(p["level"]), _int(p["offset"]), _int(p["size"]), _live(p["live"]))
            for v, p in _map(doc["placement"]).items()
            for p in (_map(p),)
        },
        transfers=tuple(
            Transfer(
                _str(t["value"]), _str(t["src"]), _str(t["dst"]), _int(t["bytes"]), _int(t["before"]), _int(t["after"])
            )
            for t in map(_map, _list(doc["transfers"]))
        ),
        chips=_int(doc["chips"]),
        shards={_str(k): _int(v) for k, v in _map(doc["shards"]).items()},
        replicas={_str(k): _int(v) for k, v in _map(doc.get("replicas", {})).items()},
    )
    hw = _map(doc["hardware"])
    return SavedProgram(
        program=program,
        hardware=_str(hw["name"]),
        hardware_source=_str(hw["source"]),
        precision=_str(doc["precision"]),
        model=_str(doc["model"]),
        log=tuple(map(_map, _list(doc["log"]))),
    )


def _live(x: Any) -> tuple[int, int]:
    pair = _list(x)
    if len(pair) != 2:
        raise ValueError("`live` is [first, last]")
    return _int(pair[0]), _int(pair[1])


# -- files -------------------------------------------------------------------------------------


def save_program(
    compiled_or_program: Compiled | Program,
    path: str | Path,
    *,
    hardware_name: str,
    precision: str,
    hardware_source: str = "",
    model: str = "",
    force: bool = False,
) -> Path:
    """Write the program (a Compiled's, with its log) to `path` whole or not at all, gzipped when
    the name ends in .gz; InputError when `path` exists and not `force`."""
    from profiler.model.files import write_atomic

    if isinstance(compiled_or_program, Compiled):
        program, log = compiled_or_program.program, compiled_or_program.log
    else:
        program, log = compiled_or_program, ()
    doc = to_document(
        program, hardware_name=hardware_name, precision=precision, hardware_source=hardware_source, model=model, log=log
    )
    data = orjson.dumps(doc)
    return write_atomic(path, gzip.compress(data) if str(path).endswith(".gz") else data, force=force)


def load_program(path: str | Path) -> SavedProgram:
    """The saved program at `path`; InputError(path, one line) when the file is unreadable, not
    JSON, of another schema or version, or lacks a key."""
    from profiler.model.files import read_bounded

    raw = read_bounded(path)  # InputError naming the file: missing, empty, corrupt gzip, too large
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise InputError(path, f"not a saved program: not JSON ({str(e).splitlines()[0]})") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise InputError(
            path, f"not a saved program: schema {found!r}, expected {SCHEMA!r} (perf compile -o writes it)"
        )
    if doc.get("version") != VERSION:
        raise InputError(path, f"saved program version {doc.get('version')!r}; this perf reads version {VERSION}")
    try:
        return from_document(doc)
    except KeyError as e:
        raise InputError(path, f"saved program lacks the key {e.args[0]!r}") from None
    except (TypeError, ValueError, AttributeError) as e:
        raise InputError(path, f"malformed saved program: {str(e).splitlines()[0] if str(e) else e}") from None


def require_executable(saved: SavedProgram, path: str | Path | None = None) -> None:
    """InputError when an op holds an argument the file kept only as text (it can be timed, not run)."""
    for op in saved.program.ops:
        if any(isinstance(v, Opaque) for v in _flat((op.args, tuple(op.kwargs.values())))):
            raise InputError(path, f"op {op.name} ({op.target}) has an argument saved as text; it cannot be executed")


def _flat(v: Any) -> list[Any]:
    if isinstance(v, (list, tuple)):
        return [x for y in v for x in _flat(y)]
    if isinstance(v, dict):
        return [x for y in v.values() for x in _flat(y)]
    return [v]
