"""Write the fuzz seeds (tests/fuzz/seeds/): small slices of real files, one per reader, each
prefixed with its reader's byte (see fuzz_readers.py).

    python tests/fuzz/make_seeds.py [TORCH_TRACE_LOG]

- kineto: the SGLang decode trace on MI300X (tests/data/traces), cut to its first 60 events;
- perfetto: that slice exported by collectors.perfetto.write (the analysis attached);
- torch_trace: the first 60 records of a structured log that `TORCH_TRACE=dir` wrote for a
  torch.compile of gelu(x @ x) + 1 (given as the argument; kept in the seeds as written).
"""

from __future__ import annotations

import gzip
import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
SEEDS = Path(__file__).resolve().parent / "seeds"
SOURCE = ROOT / "tests/data/traces/sglang_qwen3_decode_mi300x/sglang_Qwen3-8B_decode.json.gz"


def kineto_seed() -> bytes:
    doc = json.loads(gzip.decompress(SOURCE.read_bytes()))
    doc["traceEvents"] = doc["traceEvents"][:60]
    return json.dumps(doc, indent=1).encode()


def perfetto_seed(kineto: bytes) -> bytes:
    from collectors.kineto import load_kineto
    from collectors.perfetto.write import perfetto_bytes
    from profiler.api import analyze

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.json"
        p.write_bytes(kineto)
        trace = load_kineto(p)
    return perfetto_bytes(trace, analyze(trace, top=None, sections=("roofline",)).units)


def torch_trace_seed(log: Path, records: int = 60) -> bytes:
    lines = log.read_text().splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if re.match(r"^[VIWEC]\d{4} ", line)]
    end = starts[records] if len(starts) > records else len(lines)
    return "".join(lines[:end]).encode()


if __name__ == "__main__":
    SEEDS.mkdir(exist_ok=True)
    k = kineto_seed()
    (SEEDS / "kineto").write_bytes(b"\x00" + k)
    (SEEDS / "perfetto").write_bytes(b"\x01" + perfetto_seed(k))
    if len(sys.argv) > 1:
        (SEEDS / "torch_trace").write_bytes(b"\x02" + torch_trace_seed(Path(sys.argv[1])))
    for p in sorted(SEEDS.iterdir()):
        print(f"{p}: {p.stat().st_size:,} bytes")
