"""Generate a big (>= 1 GiB) Kineto trace by repeating a real one.

Each copy k of the source's traceEvents gets its timestamps shifted by
k * (source span + gap) and its ids shifted by k * ID_SPAN, so copies neither
overlap in time nor share correlation / external / flow ids. Timestamps stay
exact: the shift is a whole number of microseconds, so only the integer part
of the decimal text changes and the fractional digits are copied verbatim.

Usage: make_big_trace.py OUT.json [--min-gb 1.0] [--source PATH] [--gap-us N]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import re
import sys
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = REPO / "tests/data/traces/ddp_allreduce_v100/df_index_resolver.json.gz"

# args that hold ids which must be unique per copy. "Fwd thread id", "cbid",
# "cid" (ROCm callback id), "Python module id", "Device Id" are not unique ids
# of one event, so they stay as they are.
ID_ARGS = (
    "External id",
    "external id",
    "correlation",
    "Ev Idx",
    "Sequence number",
    "Record function id",
    "Python id",
    "Python parent id",
)
FLOW_PHASES = ("s", "t", "f")
STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")

# Private-use characters mark placeholders inside json.dumps output; the
# source is checked not to contain them.
SLOT = "\ue000"  # "\ue000<kind><n>\ue002<suffix>": a value that changes per copy
RAW = "\ue001"  # "\ue001<text>": a float kept as its exact source text
SEP = "\ue002"
SLOT_RE = re.compile('"' + SLOT + r"([NS])(\d+)" + SEP + '([^"]*)"')
RAW_RE = re.compile('"' + RAW + '([^"]*)"')

GiB = 2**30


def load_source(path: Path) -> dict[str, Any]:
    """Parse the source, keeping every float as its exact text (marked RAW)."""
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    text = data.decode("utf-8")
    if any(c in text for c in (SLOT, RAW, SEP)) or re.search(r"\\u[eE]00[0-2]", text):
        sys.exit(f"{path}: contains the private-use marker characters; cannot template it")
    return json.loads(text, parse_float=lambda s: RAW + s)


def dumps_raw(obj: Any) -> str:
    """json.dumps that writes RAW-marked floats back as bare numbers."""
    return RAW_RE.sub(r"\1", json.dumps(obj, ensure_ascii=False))


def is_num(v: Any) -> bool:
    """A JSON number as loaded here: an int, or a RAW-marked float text."""
    return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, str) and v.startswith(RAW))


def ts_parts(ts: Any) -> tuple[int, str]:
    """Split a ts into (integer µs, fractional suffix text such as '.655' or '')."""
    if isinstance(ts, int):
        return ts, ""
    text = ts[len(RAW) :]
    dec = Decimal(text)
    if dec < 0:
        raise ValueError(f"negative ts {text} not supported")
    if "e" in text.lower():  # exponent form: rewrite exactly in plain decimal form
        text = format(dec, "f")
    whole, _, frac = text.partition(".")
    return int(whole), ("." + frac if frac else "")


def ts_value(ts: Any) -> Decimal:
    return Decimal(ts) if isinstance(ts, int) else Decimal(ts[len(RAW) :])


class Templater:
    """Turns events into one %-format string plus per-slot (base, increment)."""

    def __init__(self, shift_us: int, id_span: int, step_span: int) -> None:
        self.shift_us, self.id_span, self.step_span = shift_us, id_span, step_span
        self.slots: list[tuple[int, int]] = []  # in creation order, by slot number

    def _slot(self, kind: str, base: int, inc: int, suffix: str = "") -> str:
        self.slots.append((base, inc))
        return f"{SLOT}{kind}{len(self.slots) - 1}{SEP}{suffix}"

    def mark(self, ev: dict[str, Any]) -> dict[str, Any]:
        """Copy of ev whose per-copy values are replaced by slot markers."""
        ev = dict(ev)
        if is_num(ev.get("ts")):
            whole, frac = ts_parts(ev["ts"])
            ev["ts"] = self._slot("N", whole, self.shift_us, frac)
        if ev.get("ph") in FLOW_PHASES and isinstance(ev.get("id"), int) and ev["id"] > 0:
            ev["id"] = self._slot("N", ev["id"], self.id_span)
        name = ev.get("name")
        if isinstance(name, str) and (m := STEP_RE.match(name)):
            ev["name"] = self._slot("S", int(m.group(1)), self.step_span, "ProfilerStep#")
        args = ev.get("args")
        if isinstance(args, dict):
            args = ev["args"] = dict(args)
            for key in ID_ARGS:
                v = args.get(key)
                # 0 / negative mean "unset" in Kineto, so they are left alone
                if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                    args[key] = self._slot("N", v, self.id_span)
        return ev

    def build(self, events: list[dict[str, Any]]) -> tuple[str, list[int], list[int]]:
        """Format string for the events (one per line) and its slot bases / increments."""
        self.slots = []
        body = ",\n".join(json.dumps(self.mark(e), ensure_ascii=False) for e in events)
        body = RAW_RE.sub(r"\1", body.replace("%", "%%"))
        order: list[int] = []

        def repl(m: re.Match[str]) -> str:
            order.append(int(m.group(2)))
            if m.group(1) == "S":
                return '"' + m.group(3) + '%d"'
            return "%d" + m.group(3)

        body = SLOT_RE.sub(repl, body)
        if len(order) != len(self.slots):
            raise RuntimeError("placeholder count mismatch")
        return body, [self.slots[i][0] for i in order], [self.slots[i][1] for i in order]


def render(tmpl: str, bases: list[int], incs: list[int], k: int) -> str:
    return tmpl % tuple([b + k * i for b, i in zip(bases, incs)])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--min-gb", type=float, default=1.0, help="minimum size in GiB (2**30 bytes)")
    ap.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    ap.add_argument("--gap-us", type=int, default=1000, help="idle gap between copies (µs)")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    trace = load_source(args.source)
    events: list[dict[str, Any]] = trace.get("traceEvents", [])
    if not events:
        sys.exit(f"{args.source}: no traceEvents")

    starts = [ts_value(e["ts"]) for e in events if is_num(e.get("ts"))]
    ends = [
        ts_value(e["ts"]) + ts_value(e.get("dur", 0)) for e in events if is_num(e.get("ts")) and is_num(e.get("dur", 0))
    ]
    shift_us = math.ceil(max(ends) - min(starts)) + args.gap_us

    max_id = 0
    steps: list[int] = []
    for e in events:
        if e.get("ph") in FLOW_PHASES and isinstance(e.get("id"), int):
            max_id = max(max_id, e["id"])
        a = e.get("args")
        if isinstance(a, dict):
            max_id = max([max_id] + [a[k] for k in ID_ARGS if isinstance(a.get(k), int)])
        if isinstance(e.get("name"), str) and (m := STEP_RE.match(e["name"])):
            steps.append(int(m.group(1)))
    # one id offset for all id kinds keeps cross-references (flow id == correlation) intact;
    # a power of ten keeps the copies readable (copy k's ids are k*10^n + original)
    id_span = 10 ** len(str(max_id + 1))
    step_span = max(steps) - min(steps) + 1 if steps else 0

    # Metadata events (process / thread names) are written once, not per copy.
    tpl = Templater(shift_us, id_span, step_span)
    main_tmpl, bases, incs = tpl.build([e for e in events if e.get("ph") != "M"])
    meta_tmpl, mbases, mincs = tpl.build([e for e in events if e.get("ph") == "M"])

    min_bytes = int(args.min_gb * GiB)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".partial")
    copies = 0
    with open(tmp, "wb") as out:

        def write(s: str) -> None:
            out.write(s.encode("utf-8"))

        write("{\n")
        keys = list(trace)
        for key in keys[: keys.index("traceEvents")]:
            # header first, pretty enough that HTA's `"rank":\s+` line scan finds the rank
            write(f"  {json.dumps(key)}: {dumps_raw(trace[key])},\n")
        write('  "traceEvents": [\n')
        # stream copy after copy: only one rendered copy is in memory at a time
        while out.tell() < min_bytes:
            if copies:
                write(",\n")
            write(render(main_tmpl, bases, incs, copies))
            copies += 1
        if meta_tmpl:
            write(",\n" + render(meta_tmpl, mbases, mincs, 0))
        write("\n  ]")
        for key in keys[keys.index("traceEvents") + 1 :]:
            write(f",\n  {json.dumps(key)}: {dumps_raw(trace[key])}")
        write("\n}\n")
    os.replace(tmp, args.out)

    size = args.out.stat().st_size
    print(
        f"wrote {args.out}: {size / GiB:.2f} GiB, {copies} copies of {len(events)} events, "
        f"shift {shift_us} us/copy, id span {id_span}, {time.perf_counter() - t0:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
