"""Collectors: one adapter per source, each returning a `profiler.Trace`."""
