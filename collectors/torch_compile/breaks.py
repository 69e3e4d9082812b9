"""Graph breaks, recompilations, cache lookups and per-compile metrics from the structured log.

- graph breaks: the `dynamo_graph_break_reason` artifact ("Graph break in user code at
  <file>:<line>", the reason, the user traceback);
- recompilations: the `recompile_reasons` artifact of the new compile, one line per cache entry
  whose guards failed ("<entry>: <guard>  # <code>  # <file:line>", then the user stack);
- caches: the `<cache>_cache_<hit|miss|bypass>` artifacts (FX graph cache, AOTAutograd cache,
  and any other cache logged the same way), with the compile time a hit saved;
- compiles: one `compilation_metrics` record per frame compile (times in us there, ns here).

Text from user code passes through `profiler.model.redact.redact_text` before it is kept.
"""

from __future__ import annotations

import re

import pandas as pd

from collectors.torch_compile.tlparse import Log
from profiler.model.redact import redact_text

_AT = re.compile(r"Graph break in user code at (?P<file>.+?):(?P<line>\d+)")
_FILE_LINE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
_CACHE = re.compile(r"^(?P<cache>\w+?)_cache_(?P<state>hit|miss|bypass)$")

BREAK_COLUMNS = ["compile_id", "file", "line", "reason", "detail", "user_stack"]
RECOMPILE_COLUMNS = ["compile_id", "previous", "guard", "file", "line", "text"]
CACHE_COLUMNS = [
    "compile_id",
    "cache",
    "state",
    "cache_hash",
    "time_saved_ns",
    "reason",
]  # the cache key is a content hash
COMPILE_COLUMNS = [
    "compile_id",
    "function",
    "file",
    "line",
    "duration_ns",
    "dynamo_ns",
    "aot_autograd_ns",
    "inductor_ns",
    "codegen_ns",
    "graph_ops",
    "graph_breaks",
    "guards",
    "is_forward",
    "fail_type",
    "fail_reason",
    "recompile_reason",
    "fx_cache_hits",
    "fx_cache_misses",
    "aot_cache_hits",
    "aot_cache_misses",
]


def graph_breaks(log: Log) -> pd.DataFrame:
    """One row per graph break.

    Columns: compile_id (the compile that broke), file, line (-1 if not recorded: the user
    code where Dynamo stopped), reason (one line: what failed and Dynamo's explanation),
    detail (the reason block), user_stack (the user traceback, innermost last).
    """
    rows = []
    for r in log.of("artifact", "dynamo_graph_break_reason"):
        text = r.payload or ""
        at = _AT.search(text)
        block = text.split("Graph Break Reason:", 1)[-1]
        reason_block, _, rest = block.partition("User code traceback:")
        user_stack = rest.split("Traceback (most recent call last)", 1)[0].strip()
        rows.append(
            [
                r.compile_id,
                at["file"] if at else "",
                int(at["line"]) if at else -1,
                _short_reason(reason_block),
                redact_text(reason_block.strip()),
                redact_text(user_stack),
            ]
        )
    return pd.DataFrame(rows, columns=BREAK_COLUMNS).astype({"line": "int64"})


def _short_reason(block: str) -> str:
    """'<what failed>: <explanation>' from Dynamo's reason block (its first lines)."""
    lines = [ln.strip() for ln in block.strip().splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith("Encountered graph break when")] or lines
    head = lines[0] if lines else ""
    expl = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("Explanation:")), "")
    return redact_text(f"{head}: {expl}" if expl and expl != head else head)


def recompiles(log: Log) -> pd.DataFrame:
    """One row per failed guard that caused a recompilation.

    Columns: compile_id (the new compile), previous (the cached compile whose guard failed),
    guard (the guard expression, e.g. "n == 2" or "tensor 'x' rank mismatch..."), file, line
    (the user code the guard came from, when recorded; '' / -1 otherwise), text (the whole
    reason).
    """
    rows = []
    for r in log.of("artifact", "recompile_reasons"):
        parsed = r.json_payload()
        reasons = parsed if isinstance(parsed, list) else [r.payload or ""]
        for text in reasons:
            text = str(text)
            first = text.strip().splitlines()[0] if text.strip() else ""
            prev, _, guard = first.partition(": ")
            if not guard:
                prev, guard = "", first
            guard = guard.split("  #", 1)[0].strip()
            loc = _FILE_LINE.search(text)
            rows.append(
                [
                    r.compile_id,
                    prev.strip(),
                    redact_text(guard),
                    loc["file"] if loc else "",
                    int(loc["line"]) if loc else -1,
                    redact_text(text.strip()),
                ]
            )
    return pd.DataFrame(rows, columns=RECOMPILE_COLUMNS).astype({"line": "int64"})


def caches(log: Log) -> pd.DataFrame:
    """One row per cache lookup logged (hit, miss or bypass).

    Columns: compile_id, cache ('fx_graph', 'aotautograd', ...), state ('hit', 'miss',
    'bypass'), key, time_saved_ns (compile time a hit skipped, as recorded; -1 if none),
    reason (why it was bypassed, or the detailed status).
    """
    rows = []
    for r in log.of("artifact"):
        m = _CACHE.match(r.artifact)
        if not m:
            continue
        info = r.json_payload() if isinstance(r.json_payload(), dict) else {}
        saved = info.get("time_saved_ns")
        why = info.get("cache_bypass_reason") or info.get("reason") or info.get("cache_status_detailed") or ""
        rows.append(
            [
                r.compile_id or str(info.get("compile_id", "")),
                m["cache"],
                m["state"],
                str(info.get("key", "")),
                int(saved) if isinstance(saved, (int, float)) else -1,
                redact_text(str(why)),
            ]
        )
    return pd.DataFrame(rows, columns=CACHE_COLUMNS).astype({"time_saved_ns": "int64"})


def compiles(log: Log) -> pd.DataFrame:
    """One row per `compilation_metrics` record (one frame compile).

    Columns: compile_id, function, file, line (of the compiled frame), duration_ns (whole
    compile), dynamo_ns / aot_autograd_ns / inductor_ns / codegen_ns (cumulative times, nested:
    dynamo includes aot_autograd includes inductor includes codegen; -1 if not recorded),
    graph_ops, graph_breaks, guards, is_forward, fail_type, fail_reason (a compile that failed),
    recompile_reason, fx_cache_hits / fx_cache_misses / aot_cache_hits / aot_cache_misses
    (local cache lookups of this compile).
    """
    rows = []
    for r in log.of("compilation_metrics"):
        m = r.body if isinstance(r.body, dict) else {}

        def us(key: str, m: dict = m) -> int:
            v = m.get(key)
            return int(v) * 1000 if isinstance(v, (int, float)) else -1  # us -> ns

        def num(key: str, m: dict = m) -> int:
            v = m.get(key)
            return int(v) if isinstance(v, (int, float)) else -1

        rows.append(
            [
                r.compile_id or str(m.get("compile_id") or ""),
                str(m.get("co_name") or ""),
                str(m.get("co_filename") or ""),
                num("co_firstlineno"),
                us("duration_us"),
                us("dynamo_cumulative_compile_time_us"),
                us("aot_autograd_cumulative_compile_time_us"),
                us("inductor_cumulative_compile_time_us"),
                us("inductor_code_gen_cumulative_compile_time_us"),
                num("graph_op_count"),
                num("num_graph_breaks"),
                num("guard_count"),
                bool(m.get("is_forward", True)),
                str(m.get("fail_type") or ""),
                redact_text(str(m.get("fail_reason") or "")),
                redact_text(str(m.get("recompile_reason") or "")),
                num("inductor_fx_local_cache_hit_count"),
                num("inductor_fx_local_cache_miss_count"),
                num("aotautograd_local_cache_hit_count"),
                num("aotautograd_local_cache_miss_count"),
            ]
        )
    return pd.DataFrame(rows, columns=COMPILE_COLUMNS)
