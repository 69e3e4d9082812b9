"""Bytes of a Kineto (Chrome-trace JSON) file -> small typed event structs, never dicts.

msgspec decodes `traceEvents` straight into structs that keep only the fields the suite uses
(unknown keys are skipped inside the decoder); `extract` turns them into numpy columns a chunk
at a time (`chunks`). Timestamps and durations keep the file's decimal text (`float_hook=str`),
so `timestamps.us_to_ns` can turn the digits into exact integer nanoseconds: a float64 cannot
hold 4458676522690.655 us to the nanosecond.

A file that does not fit the fast typed path (a field of an unexpected type, a NaN literal,
invalid UTF-8) is decoded event by event instead, and every event that cannot be read is counted
in `Problems`, never silently dropped.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
from msgspec import Raw, Struct, field

from profiler.model.errors import InputError
from profiler.model.files import read_bounded
from profiler.model.trace import Problems


class Args(Struct, gc=False, frozen=True):
    """The `args` keys the suite reads; -1 / None stand for 'not recorded'."""

    external_id: int = field(default=-1, name="External id")
    external_id_legacy: int = field(default=-1, name="external id")  # 2021 traces
    correlation: int = -1
    device: int = -1
    stream: int = -1
    input_dims: Raw = field(default=Raw(), name="Input Dims")  # empty Raw: not recorded
    input_type: Raw = field(default=Raw(), name="Input type")
    concrete: Raw = field(default=Raw(), name="Concrete Inputs")  # scalar args (stride, dims...)
    # autograd: the forward op's thread-local sequence number and, on a backward node, the
    # forward thread's profiler thread id (0 on forward ops); link.seq_fwdbwd_flows pairs them
    seq_nr: int = field(default=-1, name="Sequence number")
    fwd_tid: int = field(default=-1, name="Fwd thread id")
    # collectives (record_param_comms ops and NCCL kernels carry these)
    collective: str = field(default="", name="Collective name")
    in_nelems: int = field(default=-1, name="In msg nelems")
    out_nelems: int = field(default=-1, name="Out msg nelems")
    group_size: int = field(default=-1, name="Group size")
    msg_dtype: str = field(default="", name="dtype")
    nbytes: int | str = field(default=-1, name="bytes")  # ROCm traces write it as a string
    # [memory] instant events (profile_memory)
    mem_bytes: int | None = field(default=None, name="Bytes")
    total_allocated: int | None = field(default=None, name="Total Allocated")
    total_reserved: int | None = field(default=None, name="Total Reserved")
    mem_device_type: int = field(default=-1, name="Device Type")
    mem_device_id: int = field(default=-1, name="Device Id")
    # metadata events (ph "M"): process_name / thread_name
    label: str | None = field(default=None, name="name")
    # counter events (ph "C"): {"value": number}, the sample (empty Raw: not recorded)
    value: Raw = field(default=Raw(), name="value")


NO_ARGS = Args()


class Event(Struct, gc=False, frozen=True):
    """One traceEvents entry; ts/dur are int (integer µs) or the decimal text (see module doc)."""

    ph: str = ""
    name: str = ""
    cat: str = ""
    pid: int | str = -1
    tid: int | str = -1
    ts: Any = None
    dur: Any = None
    id: int | str | None = None
    args: Args = NO_ARGS


FAST = msgspec.json.Decoder(list[Event], float_hook=str)
_ONE = msgspec.json.Decoder(Event, float_hook=str)
_RAW_LIST = msgspec.json.Decoder(list[Raw])
_TOP = msgspec.json.Decoder(dict[str, Raw])
# NaN/Infinity are not JSON, but Python's json module writes them. Quote them so the event
# decodes and its timestamp is then counted as not a number.
_BAD_UTF8 = "invalid UTF-8 sequences replaced by U+FFFD"
_NON_JSON_NUMBER = re.compile(rb"(?<=[:,\[])(\s*)(-?(?:NaN|Infinity))(?=\s*[,}\]])")


@contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic GC: millions of short-lived tuples would trigger it for nothing."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def read_bytes(path: Path, max_bytes: int | None = None) -> bytes:
    """The file's JSON bytes, gunzipped when it is gzip (by magic number, not by name); only a
    regular file, never more than `max_bytes` (profiler.model.files.read_bounded)."""
    return read_bounded(path, max_bytes)


def split_top(path: Path, data: bytes, problems: Problems) -> dict[str, Raw]:
    """The top-level object's fields as raw JSON slices (decoded one by one later)."""
    try:
        top = _TOP.decode(data)
    except msgspec.ValidationError:
        raise InputError(path, "not a trace: the JSON is not an object") from None
    except msgspec.DecodeError as e:
        if "UTF-8" in str(e):
            problems.add(_BAD_UTF8, _count_bad_utf8(data))
            return split_top(path, data.decode("utf-8", "replace").encode(), problems)
        if _NON_JSON_NUMBER.search(data):  # Python's json writes NaN; the events decode later
            return split_top(path, _NON_JSON_NUMBER.sub(rb'\1"\2"', data), problems)
        raise InputError(path, f"not valid JSON ({_describe(e)})") from None
    if "traceEvents" not in top:
        raise InputError(path, "not a trace: no 'traceEvents' list")
    return top


def decode_events(path: Path, raw: Raw, problems: Problems) -> list[Event]:
    """traceEvents -> list of Event, fast typed path first, event by event if that fails."""
    buf = bytes(raw)
    with no_gc():
        try:
            return FAST.decode(buf)
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass
        return decode_leniently(path, buf, problems)


def decode_leniently(path: Path, buf: bytes, problems: Problems) -> list[Event]:
    if _NON_JSON_NUMBER.search(buf):
        buf = _NON_JSON_NUMBER.sub(rb'\1"\2"', buf)
    try:
        items = _RAW_LIST.decode(buf)
    except msgspec.ValidationError:
        raise InputError(path, "not a trace: 'traceEvents' is not a list") from None
    except msgspec.DecodeError as e:
        if "UTF-8" in str(e):
            fixed = buf.decode("utf-8", "replace").encode()
            problems.add(_BAD_UTF8, _count_bad_utf8(buf))
            return decode_leniently(path, fixed, problems)
        raise InputError(path, f"not valid JSON ({_describe(e)})") from None
    events: list[Event] = []
    for item in items:
        try:
            events.append(_ONE.decode(item))
        except msgspec.ValidationError as e:
            problems.add(f"events skipped: malformed ({_field_of(e)})")
        except msgspec.DecodeError:  # invalid UTF-8 inside a string: keep the event, mark the bytes
            fixed = bytes(item).decode("utf-8", "replace").encode()
            try:
                events.append(_ONE.decode(fixed))
                problems.add("events with invalid UTF-8 (bad bytes shown as U+FFFD)")
            except (msgspec.ValidationError, msgspec.DecodeError) as e:
                problems.add(f"events skipped: malformed ({_field_of(e)})")
    return events


def decode_value(raw: Raw) -> Any:
    """A top-level metadata value (deviceProperties, distributedInfo, ...), or None if unreadable."""
    try:
        return msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return None


def _describe(e: msgspec.DecodeError) -> str:
    msg = str(e)
    return "truncated: the file ends mid-JSON" if "truncated" in msg else msg


def _field_of(e: msgspec.ValidationError) -> str:
    m = re.search(r"at `\$(.*)`", str(e))
    head = str(e).split(" - at")[0].lower()
    return f"{head} at {m.group(1)}" if m else head


def _count_bad_utf8(buf: bytes) -> int:
    return buf.decode("utf-8", "replace").count("\ufffd") - buf.decode("utf-8", "ignore").count("\ufffd")
