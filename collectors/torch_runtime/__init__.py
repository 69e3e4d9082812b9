"""Live torch.profiler runs: a script, a model factory, or a `with profile(...)` block -> a Kineto
trace file, loaded as a `Trace` through collectors.kineto. Imports torch: load it lazily."""

from collectors.torch_runtime.run_model import run_model
from collectors.torch_runtime.run_script import run_script
from collectors.torch_runtime.session import Session, active, profile, step

__all__ = ["Session", "active", "profile", "run_model", "run_script", "step"]
