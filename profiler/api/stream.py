"""`perf analyze --memory-limit`: a trace whose in-memory analysis would not fit is streamed.

Two passes, each holding one chunk at a time:
1. ingest: collectors.kineto.stream cuts each file's traceEvents into chunks and builds each
   chunk's events table; each is appended to `events.parquet` as a row group (categoricals as
   Arrow dictionaries; page checksums on), with the files' top-level fields and problems in
   `meta.json`. With the cache on, the folder is a cache entry (profiler.api.cache's key, under
   `streams/`), so a second run skips the parse; else a temporary folder, removed at the end.
2. analyze: the row groups are read back one at a time, only the columns analysis.streamed
   needs, each rank's clock offset added, and folded into `StreamTotals`.

Sections computed: the trace overview, device busy/idle time, top kernels, top ops (host time;
their device time is not linked). Not computed, with the reason in `STREAM_SKIPS`.

Memory model: peak = interpreter and libraries (BASELINE) + about 14x one chunk (measured on a
1 GiB trace: 8 MiB chunks peaked 202 MiB above the baseline, 32 MiB chunks 424 MiB: the text and
its copy for decoding, the decoded events, about 5x the text (chunks.py), the tables, the Arrow
copy), so the chunk is (limit - BASELINE) / 16, at least 4 MiB: a limit under ~0.5 GiB cannot be
met. The in-memory path needs about 3x the decompressed text (benchmarks/bench_ingest.py's
bound), which decides when to stream.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from profiler.api.result import Analysis
from profiler.model.errors import InputError
from profiler.model.files import GZIP_MAGIC, default_max_bytes
from profiler.model.trace import Problems, Trace, empty_table

MiB = 1 << 20
BASELINE = 400 * MiB  # python, numpy, pandas, pyarrow, msgspec loaded: measured ~300 MiB RSS
IN_MEMORY_FACTOR = 3  # peak of the in-memory path / decompressed trace bytes
MIN_CHUNK, MAX_CHUNK = 4 * MiB, 256 * MiB
#: What a streamed analysis leaves out, and why (printed with the report; JSON metadata.streamed).
STREAM_SKIPS = {
    "roofline, verdict, advice, timeline, modules": "a kernel's FLOPs and bytes come from the op that launched "
    "it, found through its thread's nesting and launch links over the whole trace",
    "critical_path": "needs the whole event graph",
    "ops device_ns": "an op's device time is linked through the whole trace (reported as -1)",
    "memory, llm": "allocator samples and serving steps are not kept by the streaming reader",
}


def default_memory_limit() -> int:
    """Three quarters of the memory available now (profiler.model.files.default_max_bytes is half)."""
    return default_max_bytes() * 3 // 2


def trace_files(path: Path) -> list[Path]:
    """The Kineto files `path` names (itself, or those of a directory, as load_kineto reads them)."""
    from collectors.kineto.load import TRACE_SUFFIXES

    if path.is_dir():
        return sorted(p for p in path.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
    return [path]


def decompressed_size(path: Path) -> int:
    """A file's size once decompressed: gzip's trailer holds it modulo 2**32, so the smallest value
    congruent to it that is at least the compressed size (gzip rarely expands data)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            if f.read(2) != GZIP_MAGIC or size < 18:
                return size
            f.seek(-4, os.SEEK_END)
            isize = int.from_bytes(f.read(4), "little")
    except OSError:
        return 0
    wraps = max(0, -(-(size - isize) // 2**32))
    return isize + wraps * 2**32


def should_stream(path: str | Path, memory_limit: int) -> bool:
    """True when the in-memory analysis of `path` would need more than `memory_limit` bytes."""
    p = Path(path)
    try:
        if not (p.is_file() or p.is_dir()):
            return False
        files = trace_files(p)
    except OSError:  # unreadable: the loader says so, in one line
        return False
    return bool(files) and IN_MEMORY_FACTOR * sum(map(decompressed_size, files)) > memory_limit


def chunk_bytes(memory_limit: int) -> int:
    return int(min(MAX_CHUNK, max(MIN_CHUNK, (memory_limit - BASELINE) // 16)))


def analyze_streamed(
    path: str | Path,
    *,
    memory_limit: int,
    top: int | None = 20,
    max_bytes: int | None = None,
    cache: bool = True,
    chunk: int | None = None,
) -> tuple[Analysis, dict[str, Any]]:
    """The streamed analysis of a Kineto file or directory, and the metadata for the report
    (`chunk`: bytes of JSON per chunk, default from the limit: `chunk_bytes`)."""
    from analysis.overview import overview
    from analysis.streamed import COLUMNS, StreamTotals
    from profiler.api.hardware import hardware_notes

    path = Path(path)
    files = trace_files(path)
    if not files:
        raise InputError(path, "no trace files (*.json, *.json.gz) in this directory")
    with _folder(path, cache) as folder:
        if not _complete(folder):
            _ingest(files, folder, chunk or chunk_bytes(memory_limit), max_bytes)
        meta = json.loads((folder / "meta.json").read_text())
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(folder / "events.parquet", page_checksum_verification=True)
        base = {int(r): int(b) for r, b in meta["base_ns"].items()}
        totals = StreamTotals()
        for i in range(pf.num_row_groups):
            ev = pf.read_row_group(i, columns=COLUMNS).to_pandas()
            offset = np.vectorize(lambda r: base.get(int(r), 0), otypes=[np.int64])(ev["rank"].to_numpy())
            ev["ts"] = ev["ts"].to_numpy() + offset
            totals.add(ev)
    problems = Problems()
    for reason, n in meta["problems"].items():
        problems.add(reason, n)
    trace = _bare_trace(meta, totals)
    dt = totals.device_time()
    busy = int(dt.loc[dt["device"] != "cpu", "busy_ns"].sum())
    ov = replace(
        overview(trace),
        start_ns=totals.start,
        end_ns=totals.end,
        events_by_kind=tuple((str(k), int(v)) for k, v in totals.kinds.most_common() if v),
        steps=tuple(sorted(totals.steps)),
    )
    result = Analysis(
        overview=ov,
        device_time=dt,
        top_ops=totals.top_ops(top),
        top_kernels=totals.top_kernels(busy, top),
        problems=problems,
        hardware_notes=hardware_notes(trace, None),
    )
    metadata = {
        **trace.metadata,
        "streamed": {
            "memory_limit": memory_limit,
            "events": totals.events,
            "chunks": pf.num_row_groups,
            "skipped": STREAM_SKIPS,
        },
    }
    return result, metadata


def _bare_trace(meta: dict[str, Any], totals: Any) -> Trace:
    """A Trace without events that carries the files' metadata and devices (what overview and
    hardware_notes read)."""
    from collectors.kineto.devices import device_table

    pairs = pd.DataFrame(sorted(totals.places), columns=["rank", "device"])
    ranks = {int(r): m for r, m in meta["ranks"].items()}
    devices = device_table(pairs, ranks) if len(pairs) else empty_table("devices")
    metadata = {"files": meta["files"], "ranks": {str(r): m for r, m in sorted(ranks.items())}}
    return Trace(empty_table("events"), empty_table("counters"), empty_table("flows"), devices, metadata)


@contextmanager
def _folder(path: Path, cache: bool) -> Iterator[Path]:
    """The cache entry for `path`'s streamed tables, or a temporary folder removed afterwards."""
    from profiler.api.cache import _prune, _sources, cache_dir, content_key

    root = cache_dir() if cache else None
    sources = _sources(path) if root is not None else None
    if root is not None and sources is not None:
        entry = root / "streams" / content_key(root, path, sources)
        if _complete(entry):
            with suppress(OSError):
                os.utime(entry / "meta.json")  # last read, for pruning (profiler.api.cache._prune)
            yield entry
            return
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{entry.name}-", dir=_mkdir(entry.parent)))
        try:
            yield tmp
            if _complete(tmp):
                shutil.rmtree(entry, ignore_errors=True)
                os.rename(tmp, entry)
                _prune(entry.parent, keep=entry)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return
    tmp = Path(tempfile.mkdtemp(prefix="perf-stream-"))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _mkdir(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


def _complete(folder: Path) -> bool:
    """The folder holds a whole ingest: meta.json (written last) and the Parquet file whose
    footer reads and whose row count it records."""
    try:
        meta = json.loads((folder / "meta.json").read_text())
        import pyarrow.parquet as pq

        return pq.ParquetFile(folder / "events.parquet").metadata.num_rows == meta["rows"]
    except Exception:  # noqa: BLE001 - absent, half written or damaged: ingest again
        return False


def _ingest(files: list[Path], folder: Path, chunk: int, max_bytes: int | None) -> None:
    """Stream every file into folder/events.parquet (row groups) and folder/meta.json."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from collectors.kineto.stream import StreamedFile

    for f in ("meta.json", "events.parquet"):
        (folder / f).unlink(missing_ok=True)
    writer: pq.ParquetWriter | None = None
    rows, ranks, base, problems = 0, {}, {}, Problems()
    try:
        for i, path in enumerate(files):
            sf = StreamedFile(path, chunk, max_bytes, id_offset=rows)
            for ev in sf.chunks():
                if len(files) > 1 and "distributedInfo" not in sf.metadata:
                    ev["rank"] = np.int32(i)  # ranks by file order, as load_kineto does
                table = _arrow(ev, pa)
                if writer is None:
                    writer = pq.ParquetWriter(
                        folder / "events.parquet", table.schema, compression="lz4", write_page_checksum=True
                    )
                writer.write_table(table)
            rank = sf.rank if (len(files) == 1 or "distributedInfo" in sf.metadata) else i
            if rank in ranks:
                raise InputError(path, f"claims rank {rank}, as does another file in the directory")
            b = sf.metadata.get("baseTimeNanoseconds")
            base[rank] = b if isinstance(b, int) and not isinstance(b, bool) and abs(b) < 2**62 else 0
            ranks[rank] = sf.redacted_metadata()
            problems.merge(sf.problems)
            rows = sf.id_offset + sf.rows
    finally:
        if writer is not None:
            writer.close()
    meta = {
        "rows": rows,
        "files": [str(p) for p in files],
        "ranks": {str(r): m for r, m in ranks.items()},
        "base_ns": {str(r): b for r, b in base.items()},
        "problems": dict(problems.counts),
    }
    (folder / "meta.json").write_text(json.dumps(meta, default=str))


def _arrow(ev: pd.DataFrame, pa: Any) -> Any:
    """One chunk as an Arrow table with a fixed schema: categoricals as dictionary<int32, string>."""
    arrays = {}
    for name in ev.columns:
        s = ev[name]
        if isinstance(s.dtype, pd.CategoricalDtype):
            codes = pa.array(s.cat.codes.to_numpy().astype(np.int32))
            arrays[name] = pa.DictionaryArray.from_arrays(codes, pa.array(s.cat.categories.tolist(), pa.string()))
        else:
            arrays[name] = pa.array(s.to_numpy())
    return pa.table(arrays)
