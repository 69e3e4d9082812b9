"""`python -m profiler ...`: the `perf` CLI under a name that Linux's perf does not shadow."""

from profiler.cli import main

if __name__ == "__main__":
    main()
