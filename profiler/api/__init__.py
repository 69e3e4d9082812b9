"""The facade: `load_trace` picks the collector for a path; `analyze` runs the analysis passes.

The CLI and the dashboard import this package and the model only (tests/test_architecture.py).
Its modules, one job each: `result` (the `Analysis` object), `hardware` (which spec floors each
device), `pipeline` (loading and the analysis passes), `compile` (the compiler collector's tables
joined to the analysis); the rest is lent from its home by name (`FACADE`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiler.api.counters import CountersReport, counters_report, linux_perf, load_counters, record_cpu_counters
from profiler.api.compile import COMPILE_TABLES, compare_compile, compile_report, compile_tables, trace_compile_report
from profiler.api.hardware import DEFAULT_CPU_SPEC, hardware_notes, is_whatif, load_hardware, spec_resolver
from profiler.api.pipeline import SECTIONS, analyze, collective_patterns, load_trace, perfetto_bytes, refloor
from profiler.api.result import Analysis

if TYPE_CHECKING:
    from collectors.torch_compile.compare import CompareResult
    from collectors.torch_compile.report import CompileReport

__all__ = [
    "COMPILE_TABLES",
    "DEFAULT_CPU_SPEC",
    "SECTIONS",
    "Analysis",
    "CompareResult",
    "CompileReport",
    "CountersReport",
    "analyze",
    "collective_patterns",
    "compare_compile",
    "compile_report",
    "compile_tables",
    "counters_report",
    "hardware_notes",
    "is_whatif",
    "linux_perf",
    "load_counters",
    "load_hardware",
    "load_trace",
    "perfetto_bytes",
    "record_cpu_counters",
    "refloor",
    "spec_resolver",
    "trace_compile_report",
]

#: What the CLI and the dashboard call of the floors below, beyond the functions above: they
#: import this facade and the model only (tests/test_architecture.py). name -> (module, name
#: there); each is imported on first use (PEP 562), so `perf --help` loads none of them.
#: The docstring of each is its home's.
FACADE: dict[str, tuple[str, str]] = {
    "units": ("analysis.units", "units"),  # one row per unit of work
    "op_groups": ("analysis.roofline", "groups"),  # classified units per (name, shapes)
    "op_times": ("analysis.diff", "op_times"),  # per (kind, name, shapes) from the top tables
    "diff": ("analysis.diff", "diff"),  # op_times A against B, changes only
    "setup": ("analysis.diff", "setup"),  # one trace's setup: hardware, ranks, dtypes...
    "compare_setup": ("analysis.diff", "compare_setup"),  # two setups side by side, like-for-like or not
    "gate_samples": ("analysis.gate", "samples"),  # per (trace, step) and op name
    "gate_compare": ("analysis.gate", "compare"),  # the regression verdicts
    "UNKNOWN_WARN_SHARE": ("analysis.unknown", "WARN_SHARE"),  # above this unknown share, the report says so
    "step_walls": ("analysis.gate", "step_walls"),  # wall-clock time per step of one trace
    "GATE_MIN_RUNS": ("analysis.gate", "MIN_RUNS"),  # runs a side for a statistical verdict
    "interval_runs": ("analysis.intervals", "runs"),  # the union of intervals as disjoint runs
    "llm_phases": ("analysis.llm", "llm_phases"),  # one row per serving step
    "llm_summary": ("analysis.llm", "llm_summary"),  # per (rank, phase)
    "memory_summary": ("analysis.memory", "memory_summary"),  # allocator peak per device
    "memory_timeline": ("analysis.memory", "memory_timeline"),  # allocator samples, down-sampled
    "kv_cache_footprint": ("analysis.memory", "kv_cache_footprint"),
    "write_perfetto": ("collectors.perfetto", "write_perfetto"),
    "write_chrome_json": ("collectors.perfetto", "write_chrome_json"),
    "run_model": ("collectors.torch_runtime", "run_model"),  # perf profile --model (torch)
    "run_script": ("collectors.torch_runtime", "run_script"),  # perf profile SCRIPT (torch)
    "prepare_model": ("collectors.torch_runtime.run_model", "prepare"),
    "torch_profile": ("collectors.torch_runtime.session", "profile"),  # a profiled block (autotune's Inductor runner)
    "load_factory": ("collectors.torch_runtime.specs", "load_factory"),  # perf compile --model (torch)
    "load_accel": ("accelerator.hardware", "load_accel"),  # perf compile --accel
    "accel_workloads": ("accelerator.workloads", "WORKLOADS"),  # perf compile's built-in models (torch)
    "compile_model": ("accelerator.compiler.pipeline", "compile_model"),  # perf compile (torch)
    "accel_check": ("accelerator.compiler.check", "check"),
    "accel_bounds": ("accelerator.compiler.check", "BOUNDS"),
    "accel_report": ("accelerator.compiler.report", "report"),
    "accel_load_plan": ("accelerator.compiler.fusion", "load_plan"),  # perf compile --plan
    "to_mlir": ("accelerator.compiler.mlir", "to_mlir"),
    "accel_trace_document": ("accelerator.compiler.trace_events", "trace_document"),  # perf compile --trace
    "save_program": ("accelerator.compiler.saved", "save_program"),  # perf compile -o
    "load_program": ("accelerator.compiler.saved", "load_program"),  # perf simulate PROGRAM.json
    "accel_presets": ("accelerator.hardware", "presets"),  # perf simulate --list
    "accel_hardware_spec": ("accelerator.sim.spec", "hardware_spec"),  # AccelSpec -> roofline HardwareSpec
    "gemm_report": ("accelerator.sim.timing", "gemm_report"),  # perf simulate --gemm
    "parse_dims": ("accelerator.sim.timing", "parse_dims"),
    "gemm_kernel_report": ("accelerator.sim.kernel", "gemm_kernel_report"),  # perf simulate --gemm --accel
    "accel_simulate": ("accelerator.sim.run", "simulate"),  # perf simulate MODEL: a compiled program's kernels
    "accel_sim_summary": ("accelerator.sim.trace", "summary"),  # ... its times and limiters (--json)
    "accel_sim_document": ("accelerator.sim.trace", "trace_document"),  # ... as a Kineto-shaped trace (-o)
    "accel_serving_workloads": ("accelerator.sim.serving", "serving_workloads"),  # decoders it can serve (torch)
    "accel_compile_serving": ("accelerator.sim.serving", "compile_serving"),  # perf simulate --prompt/--decode
    "accel_simulate_serving": ("accelerator.sim.serving", "simulate_serving"),  # ... its prefill and decode steps
    "accel_serving_document": ("accelerator.sim.serving_trace", "serving_document"),  # ... as one annotated trace
    "CompileReport": ("collectors.torch_compile.report", "CompileReport"),  # perf compile-report's tables
    "compile_report_doc": ("collectors.torch_compile.report", "report_doc"),  # ... as the perfCompile JSON doc
    "CompareResult": ("collectors.torch_compile.compare", "CompareResult"),  # perf profile --compare-compile
    "counter_spec_level": ("analysis.measured_roofline", "spec_level"),  # a measured level's memory level in a spec
    "numerics_diff": ("profiler.api.deploy", "numerics_diff"),  # perf diff --numerics, perf gate --accuracy
    "NUMERICS_THRESHOLD": ("analysis.numerics", "DEFAULT_THRESHOLD"),  # rel_error past which a layer diverges
    "load_ranks": ("profiler.api.engine_dask", "load_ranks"),  # perf analyze DIR --engine dask (dask: lazy)
    "should_stream": ("profiler.api.stream", "should_stream"),  # perf analyze --memory-limit: too big for memory?
    "analyze_streamed": ("profiler.api.stream", "analyze_streamed"),  # ... then the chunk-by-chunk analysis
    "default_memory_limit": ("profiler.api.stream", "default_memory_limit"),
    "STREAM_SKIPS": ("profiler.api.stream", "STREAM_SKIPS"),  # what the streamed analysis leaves out, and why
    "OUTPUT_TABLES": ("analysis.columns", "OUTPUT_TABLES"),  # every Analysis table's columns
    "output_tables_markdown": ("analysis.columns", "markdown"),  # their reference (docs/json-schema.md)
}


def __getattr__(name: str):
    """The FACADE names, imported from their home on first use."""
    home = FACADE.get(name)
    if home is None:
        raise AttributeError(f"module 'profiler.api' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home[0]), home[1])
    globals()[name] = value
    return value
