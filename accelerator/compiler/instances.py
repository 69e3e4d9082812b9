"""The instances of a program's identical blocks (`program.repeat`, accelerator/compiler/blocks.py)
after capture: which op of instance k is which op of instance 0, so that fusion and tiling
decide for the first instance and replay the decision on the others.

An op belongs to instance k when its module path is the block's (`layers.k`) or under it. The
instances correspond op by op in program order when every instance has as many ops as the
first and the i-th op of each has the i-th op's target, type and constant arguments (the
passes before fusion keep each op's own decisions: precision by module path, legalisation by
target). Otherwise (a pass treated one layer differently, a precision override naming one
layer) there is no correspondence and every instance is decided on its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelerator.compiler.program import Program, Ref, map_refs


@dataclass(frozen=True)
class Instances:
    """`path`: the blocks' module path ("layers"); `of`: op name -> its instance (0..count-1);
    `to`: per instance k, instance 0's op name -> instance k's; `back`: any instance's op name
    -> instance 0's."""

    path: str
    of: dict[str, int]
    to: list[dict[str, str]]
    back: dict[str, str]

    @property
    def count(self) -> int:
        return len(self.to)

    def span(self) -> str:
        """`layers.1-31`: the instances a replay covers."""
        return f"{self.path}.1-{self.count - 1}" if self.count > 2 else f"{self.path}.1"


def _shape(value: Any) -> Any:
    """An argument with every reference blanked: what must match between instances."""
    return map_refs(value, lambda r: Ref(""))


def instances(program: Program) -> Instances | None:
    """The correspondence (module docstring), None without repeated blocks or when it fails."""
    rep = program.repeat
    if rep is None:
        return None
    prefix = rep.path + "."
    blocks: list[list[Any]] = [[] for _ in range(rep.count)]
    for op in program.ops:
        if op.module.startswith(prefix):
            head = op.module[len(prefix) :].split(".", 1)[0]
            if head.isdigit() and int(head) < rep.count:
                blocks[int(head)].append(op)
    first = blocks[0]
    if not first or any(len(b) != len(first) for b in blocks):
        return None
    key0 = [(o.target, o.type, _shape(o.args), sorted(o.kwargs)) for o in first]
    of: dict[str, int] = {}
    to: list[dict[str, str]] = []
    for k, block in enumerate(blocks):
        if k and [(o.target, o.type, _shape(o.args), sorted(o.kwargs)) for o in block] != key0:
            return None
        to.append({a.name: b.name for a, b in zip(first, block)})
        of.update({o.name: k for o in block})
    return Instances(rep.path, of, to, {b: a for m in to for a, b in m.items()})
