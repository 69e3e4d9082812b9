"""Built-in workloads the accelerator compiler is tested on (tiny sizes; real shapes later)."""

from accelerator.workloads.llama import LlamaConfig, TinyLlama, tiny_llama
from accelerator.workloads.mlp import MLP, tiny_mlp

__all__ = ["MLP", "LlamaConfig", "TinyLlama", "tiny_llama", "tiny_mlp"]
