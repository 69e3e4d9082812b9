"""The compile log as trace events, so the suite's readers put this compiler's passes on the
compiler track of a `Trace` as they do torch.compile's (`perf compile --trace FILE`).

The dialect is the one collectors/torch_compile/embed.py writes into Kineto files (and
collectors/kineto reads back as kind `compile_pass`, source `compiler`, track `rank0/compiler`):
one complete ('X') event per pass, category `compile_pass`, back to back from ts 0 in the
order the passes ran, ts/dur in µs with 3 decimals (exact to the ns), args {phase, compile_id,
self_us, ops_before, ops_after, decisions}; a thread_name event names the lane. The whole
`perf compile --json` document travels in the top-level `perfAccelCompile` field."""

from __future__ import annotations

from typing import Any

from accelerator.compiler.pipeline import PassLog

CATEGORY = "compile_pass"  # collectors/kineto/kinds.py maps it to Kind.COMPILE_PASS
DOC_KEY = "perfAccelCompile"


def compile_events(log: tuple[PassLog, ...] | list[PassLog], pid: int = 0) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    t_ns = 0
    for row in log:
        if row.skipped:
            continue
        out.append(
            {
                "ph": "X",
                "cat": CATEGORY,
                "name": row.name,
                "pid": pid,
                "tid": 0,
                "ts": round(t_ns / 1000, 3),
                "dur": round(row.wall_ns / 1000, 3),
                "args": {
                    "phase": row.name,
                    "compile_id": "npu",
                    "self_us": round(row.wall_ns / 1000, 3),
                    "ops_before": row.ops_before,
                    "ops_after": row.ops_after,
                    "decisions": len(row.decisions),
                },
            }
        )
        t_ns += row.wall_ns
    out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 0, "args": {"name": "npu compiler"}})
    return out


def trace_document(log: tuple[PassLog, ...] | list[PassLog], report: dict[str, Any]) -> dict[str, Any]:
    """A Chrome/Kineto JSON document of the compile (write it with orjson)."""
    return {"schemaVersion": 1, "traceEvents": compile_events(log), DOC_KEY: report}
