"""Built-in workloads of the accelerator compiler: tiny ones the tests run, and the Llama-2-7B and
Llama-3-8B shapes on the meta device (compile only)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from accelerator.workloads.llama import LlamaConfig, TinyLlama, llama2_7b, llama3_8b, tiny_llama
from accelerator.workloads.mlp import MLP, tiny_mlp
from accelerator.workloads.resnet import SmallResNet, tiny_resnet
from accelerator.workloads.vit import TinyViT, tiny_vit

#: name -> factory returning (model, example inputs); `perf compile NAME` takes these names.
WORKLOADS: dict[str, Callable[[], tuple[Any, tuple]]] = {
    "mlp": tiny_mlp,
    "resnet": tiny_resnet,
    "vit": tiny_vit,
    "llama": tiny_llama,
    "llama2-7b": llama2_7b,
    "llama3-8b": llama3_8b,
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
