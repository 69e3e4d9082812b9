"""Built-in workloads the accelerator compiler is tested on (tiny sizes; real shapes later)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accelerator.workloads.llama import LlamaConfig, TinyLlama, tiny_llama
from accelerator.workloads.mlp import MLP, tiny_mlp
from accelerator.workloads.resnet import SmallResNet, tiny_resnet
from accelerator.workloads.vit import TinyViT, tiny_vit

#: name -> factory returning (model, example inputs); `perf compile NAME` takes these names.
WORKLOADS: dict[str, Callable[[], tuple[Any, tuple]]] = {
    "mlp": tiny_mlp,
    "resnet": tiny_resnet,
    "vit": tiny_vit,
    "llama": tiny_llama,
}

__all__ = [
    "MLP",
    "WORKLOADS",
    "LlamaConfig",
    "SmallResNet",
    "TinyLlama",
    "TinyViT",
    "tiny_llama",
    "tiny_mlp",
    "tiny_resnet",
    "tiny_vit",
]
