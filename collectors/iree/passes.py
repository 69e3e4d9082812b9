"""iree-compile's pass timing (`--mlir-timing --mlir-timing-display=tree --mlir-output-format=json`)
as one tree of passes nested as the pass managers nest.

MLIR's timing JSON is a list of top-level timers, each `{"wall": {"duration": s}, "name",
"passes": [children]}`, followed by `Rest` (Total less the top-level timers) and `Total`. Two
things make the raw list wrong to sum:

- IREE runs pipelines dynamically from inside a pass (OpPipelineAdaptorPass, FixedPointIterator,
  TranslateAllExecutables, ...): the dynamic pipeline's timer is listed again at the top level
  (merged with other runs of the same pipeline), while the pass that ran it already counts its
  time, so the top-level timers add up to more than Total. The JSON has no start times, so the
  nesting is inferred from the time accounting: largest first, each top-level timer goes under
  the pass whose unexplained time (wall less its children's) holds it, tightest fit first; one
  that no pass holds is a root. The inference keeps every nanosecond counted once; which pass
  hosts a small dynamic pipeline is a best guess where several could.
- The pass manager's worker threads time nested pipelines per thread, so children can sum past
  their parent; `collectors.iree.compile` runs iree-compile with `--mlir-disable-threading`.

The result: `Total = sum of the roots' wall + rest`, rest >= 0 up to the timer's 0.1 ms rounding
per timer (the JSON prints seconds with 4 decimals).
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: The JSON prints durations in seconds with 4 decimals: each timer is rounded to 0.1 ms.
RESOLUTION_NS = 100_000


@dataclass
class PassNode:
    """One timed pass or pipeline: `name`, `wall_ns` (wall time, ns, threading off so it is its
    own time), `children` (the passes and pipelines it ran, in the order the timer first saw them)."""

    name: str
    wall_ns: int
    children: list[PassNode] = field(default_factory=list)
    #: what MLIR's own children of this timer add up to (ns). MLIR merges timers by key, so a
    #: merged pipeline's children can add up to more than its wall (a few %); dynamic pipelines
    #: re-nested here go only into the time left beyond it.
    timed_children_ns: int = 0

    def spare_ns(self) -> int:
        """Wall time its children do not account for (ns)."""
        return self.wall_ns - sum(c.wall_ns for c in self.children)

    def as_dict(self) -> dict:
        return {"name": self.name, "wall_ns": self.wall_ns, "children": [c.as_dict() for c in self.children]}

    def walk(self, depth: int = 0):
        """(node, depth) in pre-order."""
        yield self, depth
        for c in self.children:
            yield from c.walk(depth + 1)


@dataclass(frozen=True)
class PassTree:
    """The roots (top-level pipelines, dynamic ones re-nested), the compiler's Total and the rest
    (Total less the roots, ns: time no pass timer covers: parsing, serialising the output)."""

    roots: tuple[PassNode, ...]
    total_ns: int
    rest_ns: int
    timers: int  # how many timers the tree holds (bounds the rounding: timers * RESOLUTION_NS)


def _node(entry: dict) -> PassNode | None:
    if not isinstance(entry, dict) or "name" not in entry:
        return None  # the empty `{}` MLIR prints as a leaf's children
    wall = entry.get("wall") or {}
    kids = [n for n in (_node(c) for c in entry.get("passes") or []) if n is not None]
    return PassNode(
        str(entry["name"]), round(float(wall.get("duration", 0.0)) * 1e9), kids, sum(k.wall_ns for k in kids)
    )


def pass_tree(timing: list) -> PassTree:
    """The tree of the timing JSON `timing` (module docstring). Raises ValueError when it is not
    MLIR's timing JSON (no `Total` timer)."""
    if not isinstance(timing, list):
        raise ValueError("the pass timing is not a JSON list")
    total = next((e for e in timing if isinstance(e, dict) and e.get("name") == "Total"), None)
    if total is None:
        raise ValueError("the pass timing has no Total timer")
    entries = [
        n
        for n in (_node(e) for e in timing if isinstance(e, dict) and e.get("name") not in ("Total", "Rest"))
        if n is not None
    ]
    roots: list[PassNode] = []
    placed: list[PassNode] = []  # the timers seen so far, largest first: only they can host
    for node in sorted(entries, key=lambda n: -n.wall_ns):
        _place(node, placed, roots)
    total_ns = round(float((total.get("wall") or {}).get("duration", 0.0)) * 1e9)
    timers = sum(1 for r in roots for _ in r.walk())
    return PassTree(tuple(roots), total_ns, total_ns - sum(r.wall_ns for r in roots), timers)


def _place(node: PassNode, placed: list[PassNode], roots: list[PassNode], split: bool = True) -> None:
    """Put `node` under the pass that ran it, or split it: a top-level timer merges every run of
    one pipeline (MLIR keys timers by pipeline), so runs from different passes share it; each
    child then goes where it fits, wrapped in a timer of the pipeline's name. What fits nowhere
    is a root."""
    host = _runner(placed, node.wall_ns - RESOLUTION_NS)
    if host is not None:
        host.children.append(node)
        placed.append(node)
        return
    if not split or len(node.children) < 2:
        roots.append(node)
        placed.append(node)
        return
    own = node.spare_ns()
    for child in sorted(node.children, key=lambda c: -c.wall_ns):
        _place(PassNode(node.name, child.wall_ns, [child], child.wall_ns), placed, roots, split=False)
    if own > 0:
        _place(PassNode(node.name, own), placed, roots, split=False)


def _runner(placed: list[PassNode], need_ns: int) -> PassNode | None:
    """The pass that ran a dynamic pipeline of `need_ns`: a pass (not a pipeline) inside one of the
    larger timers already placed whose spare time holds it; the tightest fit, so a long pass keeps
    its room for the longer pipelines it ran. None: a top-level pipeline of its own."""
    best: PassNode | None = None
    for tree in placed:
        for node, depth in tree.walk():
            if depth == 0 or node.name.endswith("Pipeline"):
                continue
            spare = node.spare_ns()
            if spare >= need_ns and (best is None or spare > best.spare_ns()):
                best = node
    return best
