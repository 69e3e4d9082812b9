"""Accumulated columns of one Kineto file -> the events and counters tables of one rank.

Every step is a numpy operation over whole columns; per-value Python work happens only once per
distinct place (device, stream or thread) or category.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from collectors.kineto.extract import Accumulator
from collectors.kineto.kinds import DEVICE_CATEGORIES, kind_of
from profiler.model.schema import Kind
from profiler.model.devices import device_label
from profiler.model.trace import empty_table

LINK_COLUMNS = ["parent_id", "depth", "op_id", "step"]
GLOO_PREFIX = "gloo:"  # record_function names of gloo's collectives, e.g. 'gloo:all_reduce'


def build_events(
    acc: Accumulator, rank: int, base_ns: int, simulated: bool = False, cpu_devices: frozenset[int] = frozenset()
) -> pd.DataFrame:
    """The complete ('X') events of one file as an events table (without LINK_COLUMNS).

    `simulated`: the file says it comes from a simulator (top-level `traceSource: simulator`,
    accelerator/sim/trace.py): its devices are NPUs ('npu<N>') and every row's source is
    'simulator'. `cpu_devices`: device ids whose `deviceProperties` say `deviceType: cpu` (a CPU
    running device work, e.g. IREE's dispatches): labelled 'cpu<N>' (profiler.model.devices).

    Columns as profiler.model.schema.EVENT_COLUMNS except parent_id, depth, op_id and step, which
    the loader adds from `link`. `id` is the row number here; the loader offsets it per file.
    """
    ts = acc.column("x_ts")
    n = len(ts)
    if n == 0:
        return empty_table("events").drop(columns=LINK_COLUMNS)
    col = acc.column
    cat_codes = col("x_cat", "int32")
    cat_values = acc.cats.values
    cat_kind = np.array([kind_of(c).value for c in cat_values], dtype=object)
    per_cat = np.bincount(cat_codes, minlength=len(cat_values))
    for c, k, count in zip(cat_values, cat_kind, per_cat):
        if k == Kind.OTHER and count:
            acc.problems.add(f"events of unknown category {c!r} kept as kind 'other'", int(count))
    cat_on_device = np.array([c.lower() in DEVICE_CATEGORIES for c in cat_values], dtype=bool)
    cat_profiler = np.isin(cat_kind, [Kind.PROFILER.value, Kind.OVERHEAD.value])
    on_device, profiler_rows = cat_on_device[cat_codes], cat_profiler[cat_codes]

    pid, tid = col("x_pid"), col("x_tid")
    dev_arg, stream_arg = col("x_device"), col("x_stream")
    dev_index = np.where(dev_arg >= 0, dev_arg, pid)
    stream = np.where(on_device, np.where(stream_arg >= 0, stream_arg, tid), -1)
    thread = np.where(on_device | profiler_rows, -1, tid)
    device, track = _places(
        rank, on_device, dev_index, stream, thread, profiler_rows, "npu" if simulated else "gpu", cpu_devices
    )
    compiler = cat_kind[cat_codes] == Kind.COMPILE_PASS.value
    if compiler.any():  # perf's torch.compile steps: tid = the lane (collectors/torch_compile/embed.py)
        device, track, thread = _compiler_places(rank, compiler, tid, device, track, thread)
    ext = col("x_external_id")
    ext = np.where(ext >= 0, ext, col("x_external_id_legacy"))
    row_kind = cat_kind[cat_codes]
    names = acc.names.values
    gloo = np.array([n.startswith(GLOO_PREFIX) for n in names], dtype=bool)
    if gloo.any():  # gloo runs collectives on its own worker threads: that is communication work
        is_gloo = gloo[col("x_name", "int32")] & (row_kind == Kind.ANNOTATION.value)
        row_kind = np.where(is_gloo, Kind.COLLECTIVE.value, row_kind)
    kinds = sorted(set(row_kind.tolist()))
    kind_code = np.searchsorted(np.array(kinds, dtype=object), row_kind).astype(np.int32)
    return pd.DataFrame(
        {
            "id": np.arange(n, dtype=np.int64),
            "name": acc.names.categorical(col("x_name", "int32")),
            "cat": pd.Categorical.from_codes(cat_codes, categories=pd.Index(cat_values, dtype=object)),
            "kind": pd.Categorical.from_codes(kind_code, categories=pd.Index(kinds, dtype=object)),
            "ts": ts + base_ns,
            "dur": col("x_dur"),
            "rank": np.full(n, rank, dtype=np.int32),
            "device": device,
            "track": track,
            "stream": stream,
            "thread": thread,
            "correlation": col("x_correlation"),
            "external_id": ext,
            "source": pd.Categorical.from_codes(
                np.zeros(n, np.int8) if simulated else compiler.astype(np.int8),
                categories=pd.Index(["simulator"] if simulated else ["runtime", "compiler"][: 1 + compiler.any()]),
            ),
            "shapes": acc.shapes.categorical(col("x_shapes", "int32")),
            "dtypes": acc.dtypes.categorical(col("x_dtypes", "int32")),
            "concrete": acc.concrete.categorical(col("x_concrete", "int32")),
            "collective": acc.collectives.categorical(col("x_collective", "int32")),
            "msg_in_nelems": col("x_in_nelems"),
            "msg_out_nelems": col("x_out_nelems"),
            "group_size": col("x_group_size").astype(np.int32),
            "msg_dtype": acc.msg_dtypes.categorical(col("x_msg_dtype", "int32")),
            "bytes_recorded": col("x_nbytes"),
        }
    )


def _places(
    rank: int,
    on_device: np.ndarray,
    dev_index: np.ndarray,
    stream: np.ndarray,
    thread: np.ndarray,
    profiler_rows: np.ndarray,
    prefix: str = "gpu",
    cpu_devices: frozenset[int] = frozenset(),
) -> tuple[pd.Categorical, pd.Categorical]:
    """Device label ('cpu', 'gpu<N>', or `prefix`<N>; 'cpu<N>' for the ids in `cpu_devices`) and
    track label per row, built once per distinct place."""
    # One int64 key per place: device rows pack (device+1, stream+1) into the upper and lower
    # 32 bits; host rows are -(thread+3); profiler rows -1. Ids are clipped into 31 bits (real
    # ones fit) so that no junk id can land in another place's range.
    dev_index, stream = np.clip(dev_index, -1, 2**31 - 2), np.clip(stream, -1, 2**31 - 2)
    thread = np.clip(thread, -1, 2**31)
    key = np.where(on_device, ((dev_index + 1) << 32) | (stream + 1), -(thread + 3))
    key = np.where(profiler_rows, -1, key)
    codes, uniq = pd.factorize(key)
    devices, tracks = [], []
    for k in uniq.tolist():
        if k == -1:
            devices.append("cpu")
            tracks.append(f"rank{rank}/profiler")
        elif k < 0:
            devices.append("cpu")
            tracks.append(f"rank{rank}/cpu/thread{-k - 3}")
        else:
            index = (k >> 32) - 1
            devices.append(device_label("cpu" if index in cpu_devices else prefix, index))
            tracks.append(f"rank{rank}/{devices[-1]}/stream{(k & 0xFFFFFFFF) - 1}")
    return _from_codes(codes, devices), _from_codes(codes, tracks)


def _compiler_places(
    rank: int, compiler: np.ndarray, tid: np.ndarray, device: pd.Categorical, track: pd.Categorical, thread: np.ndarray
) -> tuple[pd.Categorical, pd.Categorical, np.ndarray]:
    """Compile steps on 'rank<r>/compiler' (lane 0) or 'rank<r>/compiler/worker<k>', device cpu, no thread."""
    lane = np.where(compiler, np.clip(tid, 0, 2**31), -1)
    labels = np.where(lane == 0, f"rank{rank}/compiler", np.char.add(f"rank{rank}/compiler/worker", lane.astype(str)))
    track = pd.Categorical(np.where(compiler, labels, np.asarray(track, dtype=object)).astype(object))
    device = pd.Categorical(np.where(compiler, "cpu", np.asarray(device, dtype=object)).astype(object))
    return device, track, np.where(compiler, -1, thread)


def _from_codes(codes: np.ndarray, labels: list[str]) -> pd.Categorical:
    """Categorical from factorize codes and one label per code (labels may repeat)."""
    cats, label_codes = np.unique(np.array(labels, dtype=object), return_inverse=True)
    return pd.Categorical.from_codes(label_codes[codes], categories=pd.Index(cats, dtype=object))


def build_memory_counters(acc: Accumulator, rank: int, base_ns: int) -> pd.DataFrame:
    """`[memory]` samples (profile_memory) as counters, in bytes: 'allocated' and 'reserved'
    (Total Allocated / Total Reserved after the event) and 'alloc_delta' (Bytes: + alloc, - free).

    Columns as profiler.model.schema.COUNTER_COLUMNS.
    """
    ts = acc.column("m_ts")
    if len(ts) == 0:
        return empty_table("counters")
    dev_type, dev_id = acc.column("m_dev_type"), acc.column("m_dev_id")
    # Device Type 0 is the CPU (c10::DeviceType::CPU); others are accelerators by Device Id.
    device = np.where(dev_type == 0, "cpu", np.char.add("gpu", dev_id.astype(str))).astype(object)
    frames = []
    for name, field in (("allocated", "m_allocated"), ("reserved", "m_reserved"), ("alloc_delta", "m_delta")):
        values = acc.column(field, "float64")
        has = ~np.isnan(values)
        codes, distinct = pd.factorize(device[has], sort=True)
        dev = pd.Categorical.from_codes(codes, categories=pd.Index(distinct, dtype=object))
        frames.append(
            pd.DataFrame(
                {
                    "track": dev.rename_categories([f"rank{rank}/{c}/memory" for c in dev.categories]),
                    "rank": np.full(len(dev), rank, dtype=np.int32),
                    "device": dev,
                    "ts": ts[has] + base_ns,
                    "name": name,
                    "value": values[has],
                }
            )
        )
    out = pd.concat(frames, ignore_index=True)
    return out.astype({"track": "category", "device": "category", "name": "category"})


def build_sample_counters(acc: Accumulator, rank: int, base_ns: int) -> pd.DataFrame:
    """Counter ('C') samples as counters: one row per sample, `name` the event's name, `value`
    its 'value' arg (in the unit the name states), on track 'rank<r>/<device>/counters', where
    the device is 'gpu<pid>' when device work (kernels, copies) runs on that pid (Kineto puts a
    device's work on pid = its index), else 'cpu'.

    Columns as profiler.model.schema.COUNTER_COLUMNS.
    """
    ts = acc.column("c_ts")
    if len(ts) == 0:
        return empty_table("counters")
    on_device = np.array([c.lower() in DEVICE_CATEGORIES for c in acc.cats.values], dtype=bool)
    device_pids = np.unique(acc.column("x_pid")[on_device[acc.column("x_cat", "int32")]] if on_device.any() else [])
    pid = acc.column("c_pid")
    device = np.where(np.isin(pid, device_pids), np.char.add("gpu", pid.astype(str)), "cpu").astype(object)
    names = acc.counter_names.categorical(acc.column("c_name", "int32"))
    out = pd.DataFrame(
        {
            "track": [f"rank{rank}/{d}/counters" for d in device],
            "rank": np.full(len(ts), rank, dtype=np.int32),
            "device": device,
            "ts": ts + base_ns,
            "name": names,
            "value": acc.column("c_value", "float64"),
        }
    )
    return out.astype({"track": "category", "device": "category", "name": "category"})
