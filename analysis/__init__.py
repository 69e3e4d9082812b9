"""Analysis: pure functions from a `Trace` to DataFrames and frozen dataclasses (no I/O)."""
