"""Does the top fusion advice save what it says? Eager vs torch.compile'd runs of a
mul -> add -> gelu -> mul chain over 16 MiB tensors (tests/test_torch_compile.py's Chain), 30
steps on one thread, in a fresh interpreter: predicted saving (the advice, on the bandwidth a STREAM
triad measures here) against the measured one (fastest eager ops minus fastest fused kernel).

    .venv/bin/python benchmarks/bench_fusion_advice.py

Prints the bandwidth, both savings and measured / predicted (within 0.5..2 on a quiet machine).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        code = (
            f"import json; from tests.test_torch_compile import _fusion_check; print(json.dumps(_fusion_check({d!r})))"
        )
        # glibc keeps freed 16 MiB blocks for reuse: page faults of fresh mappings would add
        # allocator time to the eager ops that the bandwidth model does not claim
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "MALLOC_MMAP_THRESHOLD_": str(1 << 30),
            "MALLOC_TRIM_THRESHOLD_": str(1 << 31),
        }
        r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if r.returncode:
        sys.exit(r.stderr[-3000:])
    bw, predicted, measured = json.loads(r.stdout.strip().splitlines()[-1])
    print(
        f"bandwidth {bw / 1e9:.1f} GB/s, predicted saving {predicted / 1e3:.0f} us, measured {measured / 1e3:.0f} us "
        f"per step, measured / predicted = {measured / predicted:.2f}"
    )


if __name__ == "__main__":
    main()
