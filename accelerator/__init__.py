"""The accelerator of our own: its hardware description (`hardware`), the compiler that lowers
PyTorch models onto it (`compiler`) and the workloads it is tested on (`workloads`).

Floor: like `analysis/` and `collectors/`, imports the model (`profiler.model`) and itself only."""
