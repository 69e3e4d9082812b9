"""`perf analyze DIR --engine dask`: read and analyze a directory's rank files in parallel on a
Dask cluster (a LocalCluster of worker processes by default, a running cluster by address).

Each task reads one rank file with the Kineto reader (collectors.kineto.load.read_rank_file)
and extracts that rank's collective instances (analysis.collective_instances) on its worker;
the client merges the ranks as the local reader does (merge_rank_files) and runs the same
analysis, handing it the instances, so both engines give the same report (tests/test_engine_dask.py).

Faults: a task whose worker dies is run again on another worker (Dask reschedules it, up to
`distributed.scheduler.allowed-failures` deaths, ALLOWED_FAILURES on our LocalCluster); past
that the run fails with one line naming the rank files. A rank file that cannot be read is a
warning naming it, and the other ranks are analyzed (with `strict`, an error).

Dask is an optional extra (`pip install .[scale]`): imported here only, when this engine runs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from profiler.model.errors import InputError
from profiler.model.trace import Trace

#: Worker deaths a task survives on the LocalCluster this engine starts (Dask's default: 3).
ALLOWED_FAILURES = 2
#: Retries of a task that raised (not an unreadable file: that is reported, not retried).
RETRIES = 1


@dataclass
class RankSet:
    """A directory read on the cluster: the merged trace, its collective instances, and the
    files that could not be read (path, why)."""

    trace: Trace
    instances: pd.DataFrame
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def rank_files(directory: Path) -> list[Path]:
    """The directory's trace files, as the local reader lists them."""
    from collectors.kineto.load import TRACE_SUFFIXES

    try:
        files = sorted(p for p in directory.iterdir() if p.is_file() and p.name.endswith(TRACE_SUFFIXES))
    except OSError as e:
        raise InputError(directory, f"cannot read the directory: {e.strerror or e}") from None
    if not files:
        raise InputError(directory, "no trace files (*.json, *.json.gz) in this directory")
    return files


def read_rank(path: Path, max_bytes: int | None):  # -> (RankFile, instances) | str
    """One rank, on a worker: its tables and its collective instances; an unreadable file comes
    back as its problem (a value, so Dask does not retry it; InputError does not pickle)."""
    from collectors.kineto.load import merge_rank_files, read_rank_file
    from profiler.api.ranks import rank_instances

    try:
        part = read_rank_file(path, max_bytes)
        # this rank alone, for its instances (our collective names and numbers: no string of the
        # trace, so no redaction); on a copy, as merging gives a file without one its rank
        one = merge_rank_files([replace(part, metadata=dict(part.metadata))], checked=False)
        return part, rank_instances(one)
    except InputError as e:
        return e.problem


def load_ranks(
    directory: str | Path,
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    max_bytes: int | None = None,
) -> RankSet:
    """Read every rank file of `directory` on a Dask cluster: the one at `scheduler` (an
    address), else a LocalCluster of `workers` processes (default 2), one thread each."""
    try:
        import dask
        from distributed import Client, LocalCluster
    except ImportError:
        raise InputError(None, "--engine dask needs Dask: pip install 'perf-suite[scale]'") from None

    files = rank_files(Path(directory))
    if scheduler:
        try:
            client = Client(scheduler, timeout="10s")
        except (OSError, TimeoutError) as e:
            raise InputError(None, f"--scheduler {scheduler}: cannot connect ({e})") from None
        cluster = None
    else:
        with dask.config.set({"distributed.scheduler.allowed-failures": ALLOWED_FAILURES}):
            cluster = LocalCluster(
                n_workers=workers or 2,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.ERROR,
            )
        client = Client(cluster)
    try:
        return _gather(client, files, max_bytes)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _gather(client, files: list[Path], max_bytes: int | None) -> RankSet:
    """Run read_rank for every file; merge what came back."""
    from distributed import KilledWorker

    from collectors.kineto.load import merge_rank_files

    futures = client.map(read_rank, files, max_bytes=max_bytes, retries=RETRIES, pure=False)
    parts, instances, skipped, died = [], [], [], []
    for path, fut in zip(files, futures, strict=True):
        try:
            got = fut.result()
        except KilledWorker:
            died.append(path)
            continue
        if isinstance(got, str):
            skipped.append((path, got))
            continue
        parts.append(got[0])
        instances.append(got[1])
    if died:
        names = ", ".join(p.name for p in died)
        raise InputError(None, f"Dask workers died running {len(died)} rank file(s), retries exhausted: {names}")
    if not parts:
        raise InputError(skipped[0][0], f"no rank file could be read ({skipped[0][1]})")
    trace = merge_rank_files(parts)
    for part, inst in zip(parts, instances, strict=True):
        inst["rank"] = part.rank  # the rank the merge gave the file (file order when none is recorded)
    frames = [i for i in instances if len(i)]
    merged = pd.concat(frames, ignore_index=True) if frames else instances[0]
    merged = merged.sort_values(["rank", "start_ns"], kind="stable").reset_index(drop=True)
    return RankSet(trace, merged.astype(instances[0].dtypes.to_dict()), skipped)
