"""Read Inductor's printed post-grad FX graph (the `inductor_post_grad_graph` artifact).

The graph prints one node per line, grouped under the source line it came from::

    # File: /work/model.py:16 in forward, code: y = x * s.w + s.b
    mul: "f32[4096, 1024][1024, 1]cpu" = torch.ops.aten.mul.Tensor(arg1_1, arg0_1);  arg1_1 = None
    getitem: "f32[32, 1][1, 1]cpu" = var_mean[0]
    return (mul_4,)

so every value's dtype and shape, every op node's ATen target and inputs, and the user source
line of each node can be read from the text alone (the same text a TORCH_TRACE directory holds).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from profiler.model.dtypes import ELEMENT_BYTES, FX

_VALUE = re.compile(r'(?P<name>\b[A-Za-z_]\w*): "(?P<dtype>[a-z]+\d*)\[(?P<shape>[^\]]*)\]')
_NODE = re.compile(r'^\s*(?P<name>[A-Za-z_]\w*): "[^"]*" = (?P<rhs>.*)$')
# the annotation is absent on a node returning a tuple ('var_mean = torch.ops.aten.var_mean...',
# 'prims._low_memory_max_pool_with_offsets', the CPU flash-attention fallback): its getitems carry the sizes
_NODE_ANY = re.compile(r'^\s*(?P<name>[A-Za-z_]\w*)(?:: "[^"]*")? = (?P<rhs>.*)$')
_OP = re.compile(r"^torch\.ops\.(?P<ns>\w+)\.(?P<op>\w+)(?:\.(?P<overload>\w+))?\((?P<args>.*)\)")
_ITEM = re.compile(r"^(?P<src>[A-Za-z_]\w*)\[(?P<idx>\d+)\]")
_FILE = re.compile(r"#\s*File: (?P<file>.+?):(?P<line>\d+) in (?P<fn>[^,]+)(?:, code: (?P<code>.*))?$")
_RETURN = re.compile(r"^\s*return \(?(?P<vals>.*?)\)?\s*$")
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")

#: FX dtype prefix -> our normalised dtype names, and their element sizes (profiler.model.dtypes).
DTYPE = FX
ITEMSIZE = {p: ELEMENT_BYTES[n] for p, n in FX.items()}


@dataclass(frozen=True)
class Value:
    """A tensor value in the graph: placeholder or node output."""

    dtype: str  # FX prefix: 'f32', 'bf16', 'b8'...
    shape: tuple[int | str, ...]  # sizes; a symbolic size stays a string ('s77')

    @property
    def numel(self) -> float:
        """Elements; NaN when a size is symbolic."""
        if any(not isinstance(s, int) for s in self.shape):
            return math.nan
        return float(math.prod(self.shape))

    @property
    def nbytes(self) -> float:
        return self.numel * ITEMSIZE.get(self.dtype, 4)


@dataclass(frozen=True)
class Node:
    """One op node: its ATen target ('aten::mul', 'aten.mul.Tensor' as printed), inputs, source."""

    name: str
    op: str  # 'aten::mul' (Kineto spelling: namespace::name)
    target: str  # 'aten.mul.Tensor' as printed
    inputs: tuple[str, ...]  # names of the values it reads, in argument order
    file: str = ""
    line: int = -1
    code: str = ""

    @property
    def source(self) -> str:
        return f"{self.file}:{self.line}" if self.file else ""


@dataclass
class Graph:
    """The post-grad graph: values by name, op nodes in order, outputs, and getitem aliases."""

    values: dict[str, Value] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    alias: dict[str, str] = field(default_factory=dict)  # getitem node -> the node it unpacks
    outputs: tuple[str, ...] = ()

    def origin(self, name: str) -> str:
        """The op node a value comes from (through getitem unpacking)."""
        seen = 0
        while name in self.alias and seen < 16:
            name, seen = self.alias[name], seen + 1
        return name

    def consumers(self) -> dict[str, set[str]]:
        """value name -> op nodes reading it (getitems resolved to their source)."""
        out: dict[str, set[str]] = {}
        for n in self.nodes.values():
            for i in n.inputs:
                out.setdefault(self.origin(i), set()).add(n.name)
        return out


def _shape(text: str) -> tuple[int | str, ...]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    return tuple(int(p) if p.lstrip("-").isdigit() else p for p in parts)


def parse_graph(text: str) -> Graph:
    """The post-grad graph printed by Inductor (`GraphModule.print_readable`) as a `Graph`."""
    g = Graph()
    for m in _VALUE.finditer(text):
        g.values.setdefault(m["name"], Value(m["dtype"], _shape(m["shape"])))
    src: re.Match[str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            src = None  # the printer separates source-line groups by a blank line
            continue
        if line.startswith("#"):
            src = _FILE.search(line) or src
            continue
        if line.startswith("return"):
            ret = _RETURN.match(line)
            if ret:
                g.outputs = tuple(v for v in _IDENT.findall(ret["vals"]) if v != "None")
            continue
        nm = _NODE_ANY.match(raw)
        if not nm:
            continue
        rhs = nm["rhs"].split(";  ", 1)[0]
        item = _ITEM.match(rhs)
        if item:
            g.alias[nm["name"]] = item["src"]
            continue
        op = _OP.match(rhs)
        if not op:
            continue
        inputs = tuple(i for i in _IDENT.findall(op["args"]) if i in g.values or i in g.nodes or i in g.alias)
        g.nodes[nm["name"]] = Node(
            name=nm["name"],
            op=f"{op['ns']}::{op['op']}",
            target=f"{op['ns']}.{op['op']}" + (f".{op['overload']}" if op["overload"] else ""),
            inputs=inputs,
            file=src["file"] if src else "",
            line=int(src["line"]) if src else -1,
            code=(src["code"] or "").strip() if src else "",
        )
    return g


_BINARY = {
    "*": "mul",
    "+": "add",
    "-": "sub",
    "/": "div",
    "@": "matmul",
    "**": "pow",
    "//": "floor_divide",
    "%": "remainder",
    "&": "bitwise_and",
    "|": "bitwise_or",
    "<": "lt",
    ">": "gt",
    "<=": "le",
    ">=": "ge",
    "==": "eq",
    "!=": "ne",
}
_CALLEE = re.compile(r"^(?P<fn>[A-Za-z_][\w.]*)\(")
_BIN = re.compile(r"^[\w.]+ (?P<op>\*\*|//|<=|>=|==|!=|[-*+/@%&|<>]) [\w.]+$")


def dynamo_nodes(text: str) -> list[tuple[str, str]]:
    """(node name, op base name) of the call nodes of a Dynamo graph (`dynamo_output_graph`),
    in order: 'torch._C._nn.linear(x, w)' -> 'linear', 'y * 2' -> 'mul', 'z.sum(-1)' -> 'sum',
    'x[0]' -> 'getitem'. The base names are what eager ATen ops are called ('aten::<base>')."""
    out = []
    for raw in text.splitlines():
        nm = _NODE.match(raw)
        if not nm:
            continue
        rhs = nm["rhs"].split(";  ", 1)[0].strip()
        call, binary = _CALLEE.match(rhs), _BIN.match(rhs)
        if binary:
            base = _BINARY.get(binary["op"], binary["op"])
        elif call:
            base = call["fn"].rsplit(".", 1)[-1]
        elif _ITEM.match(rhs) or re.match(r"^[\w.]+\[", rhs):
            base = "getitem"
        elif rhs.startswith("-"):
            base = "neg"
        else:
            continue
        out.append((nm["name"], base))
    return out


def dynamo_graphs(log) -> list[tuple[str, list[tuple[str, str]]]]:
    """(compile_id, [(node, base)]) of the latest compile of each frame, by frame id, from a
    structured log (collectors.torch_compile.tlparse.Log): what analysis.fusion matches to eager ops."""
    latest: dict[int, tuple[int, str, str]] = {}
    for r in log.of("dynamo_output_graph"):
        f, c = r.meta.get("frame_id"), r.meta.get("frame_compile_id")
        if isinstance(f, int) and isinstance(c, int) and (f not in latest or c >= latest[f][0]):
            latest[f] = (c, r.compile_id, r.payload or "")
    return [(cid, dynamo_nodes(text)) for _, (_, cid, text) in sorted(latest.items())]
