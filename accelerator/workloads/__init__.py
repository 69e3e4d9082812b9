"""Built-in workloads the accelerator compiler is tested on (tiny sizes; real shapes later)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accelerator.workloads.llama import LlamaConfig, TinyLlama, tiny_llama
from accelerator.workloads.mlp import MLP, tiny_mlp

#: name -> factory returning (model, example inputs); `perf compile NAME` takes these names.
WORKLOADS: dict[str, Callable[[], tuple[Any, tuple]]] = {"mlp": tiny_mlp, "llama": tiny_llama}

__all__ = ["MLP", "WORKLOADS", "LlamaConfig", "TinyLlama", "tiny_llama", "tiny_mlp"]
