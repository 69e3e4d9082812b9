"""PyTorch profiler (Kineto) Chrome-trace JSON: files, gzip, and directories of per-rank files."""

from collectors.kineto.load import load_kineto

__all__ = ["load_kineto"]
