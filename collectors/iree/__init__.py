"""The MLIR/IREE collector: capture a PyTorch model with iree-turbine, compile it with iree-compile
for the local CPU, read the pass timing tree and the dispatch regions, and time each dispatch
with IREE's HAL profiling (docs/iree.md)."""
