"""Is a file a Perfetto protobuf trace? Cheap: a name, or a peek at its first bytes (no protobuf import)."""

from __future__ import annotations

import zlib
from pathlib import Path

from profiler.model.errors import InputError
from profiler.model.files import open_regular

PERFETTO_SUFFIXES = (".pftrace", ".perfetto-trace", ".perfetto", ".pb")
#: a Perfetto trace is `repeated TracePacket packet = 1`: its first byte is field 1, length-delimited
PACKET_TAG = 0x0A


def is_perfetto(path: str | Path) -> bool:
    """True for a file named like a Perfetto trace (.pftrace, .perfetto-trace, .pb; .gz too) or
    whose (gunzipped) content starts with byte 0x0A and is not JSON. 0x0A is also a newline, so
    JSON's first non-blank byte ('{' or '[') tells them apart: read as protobuf those would be
    start-group tags (wire type 3), which Perfetto never writes."""
    path = Path(path)
    if not path.is_file():
        return False
    if path.name.removesuffix(".gz").endswith(PERFETTO_SUFFIXES):
        return True
    try:
        with open_regular(path) as f:  # never blocks, even on a FIFO swapped in after is_file
            head = f.read(4096)
    except (OSError, InputError):
        return False
    if head[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(wbits=31).decompress(head, 64)
        except zlib.error:
            return False
    return head[:1] == bytes([PACKET_TAG]) and head.lstrip(b" \t\r\n")[:1] not in (b"{", b"[")
