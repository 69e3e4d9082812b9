"""Which ATen ops went into which generated kernel, and where in the model they came from.

Sources, all in the structured log of one Inductor compile (in this order):

1. the post-grad graph (`inductor_post_grad_graph`): every node's ATen op, shapes, source line
   (collectors.torch_compile.graph_text);
2. the output code (`inductor_output_code`): the kernels, and the name each one runs under:
   with `inductor.config.cpp.enable_kernel_profile` a C++ kernel opens a record_function range
   "graph_<g>_<kernel>" (RAIIAtenRecordFunctionHandle); a Triton kernel runs under its own name;
   an extern kernel (`extern_kernels.addmm`) is the ATen op itself (aten::addmm);
3. provenance tracking (`inductor.config.trace.provenance_tracking_level=1`): the
   `inductor_provenance_tracking_node_mappings` artifact, "cppCodeToPost": kernel -> the post-grad
   nodes it computes (C++ and Triton alike). Without it, the wrapper's
   "# Topologically Sorted Source Nodes: [...], Original ATen: [...]" comments are the fallback.

Per kernel the table records what the graph says of it: `work`, the nodes it computes with the
dtypes and shapes of their values (FLOPs are the cost model's: analysis.cost.kernels.fused_flops
counts them from `work`), and its compulsory bytes (the cost model's conventions,
analysis/cost/ops.py): each tensor the kernel reads from outside read once and each value it
produces that is used outside (or returned) written once, numel * itemsize.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

from collectors.torch_compile.graph_text import DTYPE, Graph, parse_graph
from collectors.torch_compile.tlparse import Log, Record

_KERNEL_DEF = re.compile(r"^(?P<k>\w+) = async_compile\.(?P<how>\w+)\(", re.MULTILINE)
_PROFILE = re.compile(r'RAIIAtenRecordFunctionHandle\s+\w+\("(?P<pn>[^"]+)"')
_ORIGINAL = re.compile(r"#.*Source Nodes: \[(?P<src>[^\]]*)\], Original ATen: \[(?P<aten>[^\]]*)\]")
_CALL = re.compile(r"^\s*(?P<k>[\w.]+)(?:\.run)?\(")

_MATMUL = {"mm", "addmm", "bmm", "baddbmm"}

KERNEL_COLUMNS = [
    "compile_id",
    "graph",
    "kernel",
    "runtime_name",
    "kind",
    "aten_ops",
    "nodes",
    "pre_nodes",
    "sources",
    "code",
    "work",
    "bytes_read",
    "bytes_written",
    "dtype",
    "family",
    "sites",
]


@dataclass
class _Compile:
    """One Inductor graph compile's records (a frame's forward, or its backward)."""

    compile_id: str
    graph: Graph
    code: str = ""
    mapping: dict | None = None
    index: int = 0  # 0 for the first graph of this compile id (forward), 1 for the next...


def _graph_text(r: Record) -> str | None:
    if r.kind == "inductor_post_grad_graph" or r.artifact == "inductor_post_grad_graph":
        return r.payload or ""
    return None


def _compiles(log: Log) -> list[_Compile]:
    """Group post-grad graph, output code and provenance mapping per Inductor compile, in order."""
    out: list[_Compile] = []
    open_: dict[str, _Compile] = {}
    for r in log.records:
        text = _graph_text(r)
        if text is not None:
            c = _Compile(r.compile_id, parse_graph(text), index=sum(1 for o in out if o.compile_id == r.compile_id))
            out.append(c)
            open_[r.compile_id] = c
        elif r.kind == "inductor_output_code" and r.compile_id in open_:
            open_[r.compile_id].code = r.payload or ""
        elif r.artifact == "inductor_provenance_tracking_node_mappings" and r.compile_id in open_:
            m = r.json_payload()
            open_[r.compile_id].mapping = m if isinstance(m, dict) else None
    return out


def fusion_map(log: Log) -> pd.DataFrame:
    """One row per generated kernel (and per extern kernel call) of every compile in `log`.

    Columns:
      compile_id ('frame/compile'), graph (0 forward, 1 backward... within the compile id),
      kernel (Inductor's name: 'cpp_fused_add_mul_relu_0', 'triton_poi_fused_add_0',
        'extern_kernels.addmm'),
      runtime_name (the event it shows as in a profile: 'graph_0_cpp_fused_add_mul_relu_0',
        the Triton kernel's name, 'aten::addmm'),
      kind ('cpp', 'triton', 'extern'),
      aten_ops (tuple of distinct ATen ops it computes, 'aten::mul', sorted),
      nodes (tuple of post-grad node names, graph order; () from the comment fallback),
      pre_nodes (tuple: for each post-grad node, the Dynamo-graph nodes it came from, so a
        Dynamo node split over kernels is counted once per post-grad node in each),
      sources (tuple of distinct 'file:line' of the nodes, graph order), code (the first node's
        source line),
      work (tuple, one entry per post-grad node it computes, per call site, in the order the
        provenance mapping lists them: (ATen op 'aten::mm', its input values ((dtype, shape), ...) in argument order,
        its output value (dtype, shape), or None for a node returning a tuple); dtypes as
        profiler.model.dtypes names ('fp32'), a symbolic size stays a string ('s77'); None when
        the kernel's nodes are unknown; analysis.cost.kernels.fused_flops costs it),
      bytes_read, bytes_written (byte; NaN when a shape is symbolic or unknown),
      dtype (of its first output: 'fp32', 'bf16'...), family ('gemm' for matmuls, else 'fused'),
      sites (calls per run of its graph: the wrapper's call sites of the kernel; Inductor reuses one
        generated kernel for identical code, e.g. the same block in every layer).
    work and bytes are one run of the graph: summed over the kernel's call sites.
    """
    rows = []
    for c in _compiles(log):
        kernels = _kernel_nodes(c)
        # nodes an extern kernel computes: a generated kernel mapped to one only lays out its inputs
        extern = {n for k, (_, _, _, sites) in kernels.items() if _extern(k) for site in sites for n in site}
        rows += [_row(c, kernel, *parts, extern=extern) for kernel, parts in kernels.items()]
    return pd.DataFrame(rows, columns=KERNEL_COLUMNS)


def _extern(kernel: str) -> bool:
    """An extern call ('extern_kernels.mm') or an ATen fallback ('torch.ops.aten.<op>.default')."""
    return kernel.startswith(("extern_kernels.", "torch.ops."))


def _kernel_nodes(c: _Compile) -> dict[str, tuple[list[str], list[str], list[str], list[list[str]]]]:
    """kernel -> (post-grad nodes in graph order, Dynamo-graph nodes, ATen ops, the post-grad nodes
    of each call site): from provenance (one debug handle per call site); else from the wrapper's
    comments (Dynamo nodes and ATen ops only; one site per call line)."""
    order = {n: i for i, n in enumerate(c.graph.nodes)}
    mapping = c.mapping.get("cppCodeToPost") if c.mapping else None
    post_to_pre = (c.mapping or {}).get("postToPre") or {}
    out: dict[str, tuple[list[str], list[str], list[str], list[list[str]]]] = {}
    if isinstance(mapping, dict) and mapping:
        for key, nodes in mapping.items():
            kernel = str(key).rsplit(":", 1)[0]  # 'cpp_fused_add_0:2': the debug handle follows ':'
            post, _, _, sites = out.setdefault(kernel, ([], [], [], []))
            site = list(dict.fromkeys(n for n in (nodes if isinstance(nodes, list) else []) if n in c.graph.nodes))
            sites.append(site)
            post += [n for n in site if n not in post]
        for kernel, (post, pre, ops, _) in out.items():
            post.sort(key=lambda n: order.get(n, 1 << 30))
            pre += [p for n in post for p in post_to_pre.get(n, [])]
            ops += sorted({c.graph.nodes[n].op for n in post})
        return out
    pending: tuple[str, str] | None = None
    for line in c.code.splitlines():
        m = _ORIGINAL.search(line)
        if m:
            pending = (m["src"], m["aten"])
            continue
        call = _CALL.match(line)
        if pending and call and not line.strip().startswith("#"):
            _, pre, ops, sites = out.setdefault(call["k"], ([], [], [], []))
            sites.append([])
            pre += [s.strip() for s in pending[0].split(",") if s.strip()]
            ops += sorted({a.strip().replace("aten.", "aten::", 1) for a in pending[1].split(",") if a.strip()})
            pending = None
    return out


def _runtime_names(code: str) -> dict[str, tuple[str, str]]:
    """kernel -> (the name it runs under, its kind) from the output code's kernel definitions."""
    out: dict[str, tuple[str, str]] = {}
    defs = list(_KERNEL_DEF.finditer(code))
    for i, d in enumerate(defs):
        body = code[d.end() : defs[i + 1].start() if i + 1 < len(defs) else len(code)]
        kind = "triton" if "triton" in d["how"] else "cpp"
        prof = _PROFILE.search(body) if kind == "cpp" else None
        out[d["k"]] = (prof["pn"] if prof else d["k"], kind)
    return out


def _row(
    c: _Compile,
    kernel: str,
    post: list[str],
    pre: list[str],
    ops: list[str],
    sites: list[list[str]],
    *,
    extern: set[str] | frozenset[str] = frozenset(),
) -> list:
    g = c.graph
    if kernel.startswith("extern_kernels."):
        runtime, kind = "aten::" + kernel.split(".", 1)[1], "extern"
    elif kernel.startswith("torch.ops."):  # an ATen fallback ('torch.ops.aten.<op>.default') runs as that op
        ns_op = kernel.split(".")[2:4]
        runtime, kind = "::".join(ns_op), "extern"
    else:
        runtime, kind = _runtime_names(c.code).get(kernel, (kernel, "triton" if kernel.startswith("triton") else "cpp"))
    nodes = [g.nodes[n] for n in post]
    sources = tuple(dict.fromkeys(n.source for n in nodes if n.source))
    if post:
        # one run = every call site; a generated kernel lays out (copies) the inputs of the nodes
        # an extern kernel computes, it does not compute them
        costs = [_cost(g, s or post, frozenset() if kind == "extern" else extern) for s in (sites or [post])]
        work: tuple | None = tuple(entry for x in costs for entry in x[0])
        read, written = float(sum(x[1] for x in costs)), float(sum(x[2] for x in costs))
        dtype = costs[0][3]
    else:
        work, read, written, dtype = None, math.nan, math.nan, "unknown"
    family = "gemm" if any(o.split("::")[-1] in _MATMUL for o in ops) else "fused"
    return [
        c.compile_id,
        c.index,
        kernel,
        runtime,
        kind,
        tuple(sorted(set(ops))),
        tuple(post),
        tuple(pre),
        sources,
        nodes[0].code if nodes else "",
        work,
        read,
        written,
        dtype,
        family,
        max(len(sites), 1),
    ]


def _cost(g: Graph, members: list[str], extern: set[str] | frozenset = frozenset()) -> tuple[tuple, float, float, str]:
    """(work, bytes_read, bytes_written, dtype) of a kernel computing `members` of `g` (work: the
    `work` entries of the members it computes, see `fusion_map`). A member
    in `extern` (computed by an extern kernel) is only prepared here: each of its inputs is read
    (when it comes from outside) and written once (the copy in the layout the extern kernel
    wants: Inductor's CPU convolution takes channels-last copies of its input and weight)."""
    prepared = [n for n in members if n in extern]
    inside = set(members) - set(prepared)
    consumers = g.consumers()
    outputs = {g.origin(o) for o in g.outputs}
    read_names: dict[str, None] = {}
    copies: dict[str, None] = {}
    work = []
    for name in members:
        node = g.nodes[name]
        for i in node.inputs:
            if g.origin(i) not in inside:
                read_names.setdefault(i)
                if name in prepared:
                    copies.setdefault(i)
        if name in inside:
            work.append(_work(g, name))
    written = [n for n in inside if n in outputs or (consumers.get(n, set()) - inside)]
    # a getitem of a member that is used outside counts as that member's output (consumers are
    # keyed by the getitem's source: look for the getitem itself among the outside nodes' inputs)
    outside_reads = {i for n in g.nodes.values() if n.name not in inside for i in n.inputs}
    written += [
        a for a, src in g.alias.items() if src in inside and a not in written and (a in outside_reads or a in g.outputs)
    ]
    read = sum(g.values[n].nbytes for n in read_names if n in g.values)
    write = sum(
        g.values[n].nbytes
        for n in dict.fromkeys(written)
        if n in g.values and not (n in inside and n in _alias_sources(g))
    )
    write += sum(g.values[n].nbytes for n in copies if n in g.values)
    first = next((g.values[n] for n in members if n in g.values), None)
    dtype = DTYPE.get(first.dtype, first.dtype) if first else "unknown"
    return tuple(work), float(read), float(write), dtype


def _alias_sources(g: Graph) -> set[str]:
    """Nodes returning tuples (their getitems carry the sizes; the tuple itself has none)."""
    return set(g.alias.values())


def _work(g: Graph, name: str) -> tuple:
    """The `work` entry of one node: (ATen op, input values, output value), as the graph prints them."""
    node = g.nodes[name]

    def value(v: str) -> tuple[str, tuple[int | str, ...]]:
        return DTYPE.get(g.values[v].dtype, g.values[v].dtype), g.values[v].shape

    out = value(name) if name in g.values else None
    return node.op, tuple(value(i) for i in node.inputs if i in g.values), out
