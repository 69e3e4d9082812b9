"""The devices table: one row per (rank, device) seen in the events, with deviceProperties."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from profiler.model.devices import device_index


def device_table(events: pd.DataFrame, metadata_by_rank: dict[int, dict[str, Any]]) -> pd.DataFrame:
    """Columns as profiler.model.schema.DEVICE_COLUMNS.

    A GPU is matched to the `deviceProperties` entry with its id. Some traces list only device 0
    while their work runs on another id (the SGLang traces here run on device 9); when every
    listed entry describes the same hardware, that description is used, since one node's GPUs
    are alike; otherwise the device's properties stay unknown.
    """
    pairs = events[["rank", "device"]].drop_duplicates().sort_values(["rank", "device"])
    rows = []
    for rank, device in pairs.itertuples(index=False):
        props = _properties(metadata_by_rank.get(int(rank), {}), str(device))
        rows.append(
            {
                "rank": int(rank),
                "device": str(device),
                "name": str(props.get("name", "cpu" if device == "cpu" else "")),
                "sm_count": _int(props.get("numSms")),
                "compute_capability": _capability(props),
                "memory_bytes": _int(props.get("totalGlobalMem"), np.int64),
                "warp_size": _int(props.get("warpSize")),
            }
        )
    df = pd.DataFrame(
        rows, columns=["rank", "device", "name", "sm_count", "compute_capability", "memory_bytes", "warp_size"]
    )
    return df.astype(
        {
            "rank": "int32",
            "device": "category",
            "name": "object",
            "sm_count": "int32",
            "compute_capability": "object",
            "memory_bytes": "int64",
            "warp_size": "int32",
        }
    )


def _properties(meta: dict[str, Any], device: str) -> dict[str, Any]:
    index = device_index(device)  # gpu<N>, npu<N> (a simulated chip), cpu<N> (a CPU running device work)
    if index is None:
        return {}
    props = meta.get("deviceProperties")
    listed = [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []
    for p in listed:
        if p.get("id") == index:
            return p
    described = {repr(sorted((k, v) for k, v in p.items() if k != "id")) for p in listed}  # values may be lists
    return listed[0] if len(described) == 1 else {}


def cpu_devices(meta: dict[str, Any]) -> frozenset[int]:
    """Ids of the `deviceProperties` entries marked `"deviceType": "cpu"` (profiler.model.devices)."""
    props = meta.get("deviceProperties")
    listed = props if isinstance(props, list) else []
    return frozenset(
        p["id"]
        for p in listed
        if isinstance(p, dict)
        and p.get("deviceType") == "cpu"
        and isinstance(p.get("id"), int)
        and 0 <= p["id"] < 2**31
    )


def _int(v: Any, dtype: type = np.int32) -> int:
    ok = isinstance(v, int) and not isinstance(v, bool) and np.iinfo(dtype).min <= v <= np.iinfo(dtype).max
    return int(v) if ok else -1


def _capability(props: dict[str, Any]) -> str:
    """'major.minor' from computeMajor / computeMinor; '' unless both are recorded (the same rule
    as profiler.model.hardware_match)."""
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    return f"{major}.{minor}" if major is not None and minor is not None else ""
