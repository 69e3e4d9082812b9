"""Decoded event chunks -> compact numpy columns, accumulated across chunks.

Strings (names, categories, shape text) become int32 codes into one `Interner` per column, so
a name repeated a million times is stored once. What is kept:

- complete ('X') events: times in exact ns, the ids and numbers the suite links on;
- `[memory]` instant events (profile_memory samples);
- 'fwdbwd' flow ends (forward op -> backward op); 'dependency' flow ends (kernel -> kernel);
- counter ('C') samples: {"value": number} (the form Chrome's and Perfetto's docs use);
- process names from 'M' metadata events.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter

import msgspec
import numpy as np
import pandas as pd

from collectors.kineto.decode import Event
from collectors.kineto.kinds import DEPENDENCY_FLOW_CATEGORY, FWDBWD_FLOW_CATEGORY
from collectors.kineto.timestamps import us_to_ns
from profiler.model.trace import Problems

_DIGITS = re.compile(r"-?\d+")


class Fields:
    """Fields of some decoded events as numpy arrays, each built once (C loops via attrgetter)."""

    def __init__(self, events: list[Event] | tuple[Event, ...]):
        self.events = events
        self.n = len(events)
        self._cache: dict[str, np.ndarray] = {}
        self._args: list | None = None

    @classmethod
    def of_rows(cls, events: list[Event], rows: np.ndarray) -> Fields:
        if len(rows) == len(events):
            return cls(events)
        picked = itemgetter(*rows.tolist())(events) if len(rows) > 1 else [events[i] for i in rows]
        return cls(picked)

    def obj(self, name: str) -> np.ndarray:
        """An Event field as an object array ('arg_<f>' for an Args field)."""
        if name not in self._cache:
            src = self.args if name.startswith("arg_") else self.events
            get = attrgetter(name.removeprefix("arg_"))
            # fromiter never looks inside the items (np.array would probe every Raw as a buffer)
            self._cache[name] = np.fromiter(map(get, src), dtype=object, count=self.n)
        return self._cache[name]

    def int64(self, name: str) -> np.ndarray:
        """An int-typed Args field ('arg_<f>', default -1) as int64."""
        get = attrgetter(name[4:])
        try:
            return np.fromiter(map(get, self.args), dtype=np.int64, count=self.n)
        except OverflowError:  # msgspec reads ints past int64 too: no usable id, so 'not recorded'
            vals = (v if -(2**63) <= v < 2**63 else -1 for v in map(get, self.args))
            return np.fromiter(vals, dtype=np.int64, count=self.n)

    @property
    def args(self) -> list:
        if self._args is None:
            self._args = list(map(attrgetter("args"), self.events))
        return self._args


class Interner:
    """Strings -> dense int32 codes, shared by all chunks of a file."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.values: list[str] = []

    def codes(self, values: np.ndarray, text=None) -> np.ndarray:
        """Codes of an object array; `text` turns each distinct raw value into its string."""
        local, uniq = pd.factorize(values, use_na_sentinel=False)
        table = np.array([self.code(text(u) if text else u) for u in uniq], dtype=np.int32)
        return table[local]

    def code(self, s: str) -> int:
        """The code of one string, new or known."""
        code = self.index.get(s)
        if code is None:
            code = self.index[s] = len(self.values)
            self.values.append(s)
        return code

    def categorical(self, codes: np.ndarray) -> pd.Categorical:
        cats = np.array(self.values, dtype=object)
        order = np.argsort(cats, kind="stable")  # sorted categories read better in tables
        rank = np.empty(len(order), dtype=np.int32)
        rank[order] = np.arange(len(order), dtype=np.int32)
        return pd.Categorical.from_codes(
            rank[codes] if len(codes) else codes, categories=pd.Index(cats[order], dtype=object)
        )


def ints(values: np.ndarray) -> np.ndarray:
    """int64 from ints, or strings holding one (legacy 'stream 7', '25738'); -1 for anything else."""
    try:
        return np.fromiter(values, dtype=np.int64, count=len(values))
    except (TypeError, ValueError, OverflowError):
        pass
    num = np.asarray(pd.to_numeric(values, errors="coerce"), dtype=np.float64)  # C loop; '25738' too
    bad = ~np.isfinite(num) | (np.abs(num) >= 2.0**63)
    out = np.where(bad, -1, num).astype(np.int64)
    for i in np.flatnonzero(bad):  # 'stream 7' and the like: rare
        m = _DIGITS.search(values[i]) if isinstance(values[i], str) else None
        out[i] = int(m.group()) if m else -1
    return out


def _number(raw: msgspec.Raw) -> float:
    """A counter's JSON value as a float (numbers arrive as their text: float_hook=str); NaN
    when absent or not a number."""
    try:
        v = msgspec.json.decode(bytes(raw)) if len(raw) else None
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else float("nan")
    except (msgspec.MsgspecError, ValueError, OverflowError):
        return float("nan")


def _shape_text(blob: bytes) -> str:
    return blob.translate(None, b" \n\r\t").decode()


def _json_text(blob: bytes) -> str:
    """Compact JSON text of a recorded value (pretty-printed files indent inside it)."""
    try:
        return msgspec.json.encode(msgspec.json.decode(blob)).decode()
    except msgspec.MsgspecError:
        return blob.decode("utf-8", "replace")


X_INT_ARGS = (
    "device",
    "stream",
    "correlation",
    "external_id",
    "external_id_legacy",
    "in_nelems",
    "out_nelems",
    "group_size",
    "seq_nr",
    "fwd_tid",
)
#: columns holding codes, and the Accumulator interner they index
INTERNED = {
    "x_name": "names",
    "x_cat": "cats",
    "x_shapes": "shapes",
    "x_dtypes": "dtypes",
    "x_concrete": "concrete",
    "x_collective": "collectives",
    "x_msg_dtype": "msg_dtypes",
    "c_name": "counter_names",
}


@dataclass
class Accumulator:
    """Columns of one file, appended chunk by chunk; `column(name)` concatenates them."""

    problems: Problems
    names: Interner = field(default_factory=Interner)
    cats: Interner = field(default_factory=Interner)
    shapes: Interner = field(default_factory=Interner)
    dtypes: Interner = field(default_factory=Interner)
    concrete: Interner = field(default_factory=Interner)
    collectives: Interner = field(default_factory=Interner)
    msg_dtypes: Interner = field(default_factory=Interner)
    counter_names: Interner = field(default_factory=Interner)
    parts: dict[str, list[np.ndarray]] = field(default_factory=dict)
    process_names: dict[str, str] = field(default_factory=dict)
    x_given: int = 0  # complete events seen, kept or not

    def _put(self, **cols: np.ndarray) -> None:
        for k, v in cols.items():
            self.parts.setdefault(k, []).append(v)

    def column(self, name: str, dtype: str = "int64") -> np.ndarray:
        got = self.parts.get(name)
        return np.concatenate(got) if got else np.zeros(0, dtype=dtype)

    def export(self) -> dict:
        """What another process sends back: plain lists, dicts and arrays (picklable)."""
        return {
            "parts": self.parts,
            "strings": {k: getattr(self, k).values for k in INTERNED.values()},
            "problems": dict(self.problems.counts),
            "process_names": self.process_names,
            "x_given": self.x_given,
        }

    def merge(self, other: dict) -> None:
        """Append another accumulator's export (its chunks come after ours), re-coding strings."""
        tables = {
            k: np.array([getattr(self, k).code(s) for s in values] or [0], dtype=np.int32)
            for k, values in other["strings"].items()
        }
        for name, arrays in other["parts"].items():
            interner = INTERNED.get(name)
            for a in arrays:
                self.parts.setdefault(name, []).append(tables[interner][a] if interner else a)
        self.problems.counts.update(other["problems"])
        self.process_names.update(other["process_names"])
        self.x_given += other["x_given"]

    def add(self, events: list[Event]) -> None:
        # 'U2' keeps compares in C; a junk ph like 'Xy' still differs from 'X'
        ph = np.fromiter(map(attrgetter("ph"), events), dtype="U2", count=len(events))
        self._complete(Fields.of_rows(events, np.flatnonzero(ph == "X")))
        self._memory(Fields.of_rows(events, np.flatnonzero(ph == "i")))
        self._fwdbwd(Fields.of_rows(events, np.flatnonzero((ph == "s") | (ph == "f"))))
        self._counters(Fields.of_rows(events, np.flatnonzero(ph == "C")))
        for i in np.flatnonzero(ph == "M"):
            e = events[i]
            if e.name == "process_name" and e.args.label:
                self.process_names[str(e.pid)] = e.args.label

    def _complete(self, x: Fields) -> None:
        """Complete ('X') events: exact times, ids, interned strings."""
        self.x_given += x.n
        if x.n == 0:
            return
        ts, ts_missing, ts_bad = us_to_ns(x.obj("ts"))
        dur, dur_missing, dur_bad = us_to_ns(x.obj("dur"))
        p = self.problems
        p.add("events skipped: missing ts", int(ts_missing.sum()))
        p.add("events skipped: missing dur", int((dur_missing & ~ts_missing).sum()))
        bad = (ts_bad | dur_bad) & ~ts_missing & ~dur_missing
        p.add("events skipped: ts or dur is not a finite number", int(bad.sum()))
        negative = ~(ts_missing | dur_missing | bad) & (dur < 0)
        p.add("events skipped: negative dur", int(negative.sum()))
        keep = ~(ts_missing | dur_missing | bad | negative)
        everything = bool(keep.all())

        def pick(a: np.ndarray) -> np.ndarray:
            return a if everything else a[keep]

        n = int(keep.sum())
        self._put(
            x_ts=pick(ts),
            x_dur=pick(dur),
            x_name=self.names.codes(pick(x.obj("name"))),
            x_cat=self.cats.codes(pick(x.obj("cat"))),
            x_pid=ints(pick(x.obj("pid"))),
            x_tid=ints(pick(x.obj("tid"))),
            x_nbytes=ints(pick(x.obj("arg_nbytes"))),
            x_shapes=self._recorded(self.shapes, x, "arg_input_dims", pick, n, _shape_text),
            x_dtypes=self._recorded(self.dtypes, x, "arg_input_type", pick, n, _json_text),
            x_concrete=self._recorded(self.concrete, x, "arg_concrete", pick, n, _json_text),
            x_collective=self.collectives.codes(pick(x.obj("arg_collective"))),
            x_msg_dtype=self.msg_dtypes.codes(pick(x.obj("arg_msg_dtype"))),
            **{f"x_{a}": pick(x.int64(f"arg_{a}")) for a in X_INT_ARGS},
        )

    @staticmethod
    def _recorded(interner: Interner, x: Fields, name: str, pick, n: int, text) -> np.ndarray:
        """Codes of a recorded JSON value's text (shapes, dtypes); '' where not recorded."""
        raws = x.obj(name)
        if not any(map(len, raws)):  # not recorded in this chunk: skip the per-row work
            return np.full(n, interner.codes(np.array([b""], dtype=object), text)[0], dtype=np.int32)
        return interner.codes(np.fromiter(map(bytes, pick(raws)), dtype=object, count=n), text)

    def _memory(self, inst: Fields) -> None:
        """`[memory]` instant events (profile_memory samples)."""
        if inst.n == 0:
            return
        rows = np.flatnonzero(inst.obj("name") == "[memory]")
        if len(rows) == 0:
            return
        ts, missing, bad = us_to_ns(inst.obj("ts")[rows])
        self.problems.add("memory samples skipped: bad ts", int((missing | bad).sum()))
        ok = ~(missing | bad)
        rows = rows[ok]

        def num(f: str) -> np.ndarray:  # None (not recorded) -> NaN
            return np.asarray(pd.to_numeric(inst.obj(f)[rows], errors="coerce"), dtype=np.float64)

        self._put(
            m_ts=ts[ok],
            m_dev_type=inst.int64("arg_mem_device_type")[rows],
            m_dev_id=inst.int64("arg_mem_device_id")[rows],
            m_allocated=num("arg_total_allocated"),
            m_reserved=num("arg_total_reserved"),
            m_delta=num("arg_mem_bytes"),
        )

    def _counters(self, samples: Fields) -> None:
        """Counter ('C') events: (ts, pid, name, value); a sample without a finite numeric
        'value' arg or a readable ts is counted in the problems, not kept."""
        if samples.n == 0:
            return
        ts, missing, bad = us_to_ns(samples.obj("ts"))
        value = np.fromiter(map(_number, samples.obj("arg_value")), dtype=np.float64, count=samples.n)
        skip = missing | bad | ~np.isfinite(value)
        self.problems.add("counter samples skipped: no readable ts or numeric 'value' arg", int(skip.sum()))
        ok = ~skip
        self._put(
            c_ts=ts[ok],
            c_pid=ints(samples.obj("pid"))[ok],
            c_name=self.counter_names.codes(samples.obj("name")[ok]),
            c_value=value[ok],
        )

    def _fwdbwd(self, flows: Fields) -> None:
        """'fwdbwd' flow ends: forward op -> backward op; 'dependency' flow ends: producer
        kernel -> consumer kernel (a simulator's, accelerator/sim/trace.py)."""
        if flows.n == 0:
            return
        self._dependencies(flows)
        rows = np.flatnonzero(flows.obj("cat") == FWDBWD_FLOW_CATEGORY)
        if len(rows) == 0:
            return
        ts, missing, bad = us_to_ns(flows.obj("ts")[rows])
        ok = ~(missing | bad)
        self._put(
            f_ts=ts[ok],
            f_start=(flows.obj("ph")[rows] == "s")[ok],
            f_id=ints(flows.obj("id")[rows])[ok],
            f_tid=ints(flows.obj("tid")[rows])[ok],
        )

    def _dependencies(self, flows: Fields) -> None:
        """'dependency' flow ends (ts, start?, id, pid, tid): bound to the device work starting
        at ts on that pid's stream tid (link.dependency_flows)."""
        rows = np.flatnonzero(flows.obj("cat") == DEPENDENCY_FLOW_CATEGORY)
        if len(rows) == 0:
            return
        ts, missing, bad = us_to_ns(flows.obj("ts")[rows])
        ok = ~(missing | bad)
        self._put(
            d_ts=ts[ok],
            d_start=(flows.obj("ph")[rows] == "s")[ok],
            d_id=ints(flows.obj("id")[rows])[ok],
            d_pid=ints(flows.obj("pid")[rows])[ok],
            d_tid=ints(flows.obj("tid")[rows])[ok],
        )
