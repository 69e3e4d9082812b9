"""iree-compile's pass timing (`--mlir-timing --mlir-timing-display=tree --mlir-output-format=json`)
as one tree of passes nested as the pass managers nest.

MLIR's timing JSON is a list of top-level timers, each `{"wall": {"duration": s}, "name",
"passes": [children]}`, followed by `Rest` (Total less the top-level timers) and `Total`. Two
things make the raw list wrong to sum:

- IREE runs pipelines dynamically from inside a pass (OpPipelineAdaptorPass, FixedPointIterator,
  TranslateAllExecutables, SerializeAllExecutables, ...): the dynamic pipeline's timer is listed
  again at the top level, and MLIR keys timers by pipeline, so one top-level timer can merge the
  runs of several passes; the pass that ran it already counts its time, so the top-level timers
  add up to more than Total (here 5.3 s against 2.4 s). The JSON has no start times, so the
  nesting is inferred from the time accounting: largest first, each top-level timer goes under
  the pass (not pipeline) whose unexplained time (wall less its children's) holds it, the most
  room first; a merged timer that fits nowhere whole is split into its children, each placed
  alike; what fits nowhere is a root. Every nanosecond is counted once and no pass gets more
  than its wall; WHICH pass hosts a pipeline is a best guess where several could (two timers of
  equal length, a wrapper and the pipeline it ran, may come out either way round).
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
    placed: list[PassNode] = []  # the timers placed so far, largest first: only they can host
    queue = [(n, True) for n in entries]  # (timer, may be split)
    while queue:
        # largest first; among equals, the one with a pass that can host others first (a
        # wrapper pipeline before the pipeline its pass ran)
        queue.sort(key=lambda q: (q[0].wall_ns, _room(q[0])))
        node, split = queue.pop()
        host = _runner(placed, node.wall_ns - RESOLUTION_NS)
        if host is not None:
            host.children.append(node)
        elif split and len(node.children) > 1:
            # a top-level timer merges every run of one pipeline (MLIR keys timers by pipeline),
            # so runs from different passes share it: each child goes where it fits, wrapped in
            # a timer of the pipeline's name, and the pipeline's own time likewise
            queue += [(PassNode(node.name, c.wall_ns, [c], c.wall_ns), False) for c in node.children]
            if node.spare_ns() > 0:
                queue.append((PassNode(node.name, node.spare_ns()), False))
            continue
        else:
            roots.append(node)
        placed.append(node)
    total_ns = round(float((total.get("wall") or {}).get("duration", 0.0)) * 1e9)
    timers = sum(1 for r in roots for _ in r.walk())
    return PassTree(tuple(roots), total_ns, total_ns - sum(r.wall_ns for r in roots), timers)


def _room(node: PassNode) -> int:
    """The most time a pass inside `node` has left for pipelines it ran (ns)."""
    return max((n.spare_ns() for n, d in node.walk() if d and not n.name.endswith("Pipeline")), default=0)


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
