"""Names shared by the Perfetto writer and reader: debug annotations <-> event columns.

Recorded fields travel as top-level debug annotations under the names Kineto gives them in its
`args` (so ui.perfetto.dev shows what a PyTorch user expects); the analysis travels in one
nested `perf` annotation (perf.flops, perf.bytes, perf.bound, perf.efficiency...).
"""

from __future__ import annotations

#: int64 event columns -> annotation name (written when the value is not -1)
INT_ANNOTATIONS: dict[str, str] = {
    "correlation": "correlation",
    "external_id": "External id",
    "msg_in_nelems": "In msg nelems",
    "msg_out_nelems": "Out msg nelems",
    "group_size": "Group size",
    "bytes_recorded": "bytes",
}

#: text event columns -> annotation name (written when the value is not '')
TEXT_ANNOTATIONS: dict[str, str] = {
    "shapes": "Input Dims",
    "dtypes": "Input type",
    "concrete": "Concrete Inputs",
    "collective": "Collective name",
    "msg_dtype": "dtype",
}

#: written only where the value differs from what the category implies / the default
KIND_ANNOTATION = "kind"
SOURCE_ANNOTATION = "source"
DEFAULT_SOURCE = "runtime"

#: the nested analysis annotation and the entries the reader turns back into cost columns
PERF_ANNOTATION = "perf"
PERF_FLOPS = "flops"
PERF_BYTES = "bytes"

#: ChromeMetadata entries of the first packet that make a perf export exact on re-reading
META_FORMAT = "perf.format"
META_METADATA = "perf.metadata"
META_TRACKS = "perf.tracks"
META_DEVICES = "perf.devices"
FORMAT_VERSION = "perf-perfetto-export 1"

#: suffix of the extra tracks that hold slices overlapping others on one timeline row
LANE_SUFFIX = " (overlap {})"
