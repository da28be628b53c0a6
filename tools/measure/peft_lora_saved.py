"""What one bf16 Llama decoder layer keeps for backward under PEFT LoRA, adapters in bf16 or in fp32.

    pip install peft==0.21.2   # beside the bench extra (torch, transformers 5.24)
    python tools/measure/peft_lora_saved.py

PEFT's ``get_peft_model`` casts adapters of a 16-bit base to fp32 by default (``autocast_adapter_dtype=True``), and
its LoRA forward casts each adapted projection's input to the adapters' dtype (``_cast_input_dtype``). This prints
the bytes of the distinct non-parameter storages the saved-tensor hooks receive in one layer's forward (transformers
5.24 ``LlamaDecoderLayer``, SDPA, h 256, 4 heads / 2 KV heads, MLP 688, 2 × 128 tokens, LoRA rank 8, the layer input
requiring grad as a middle layer's does, and excluding it), with ``autocast_adapter_dtype`` off and on, with and
without LoRA dropout. ``tests/engine/test_training_mechanisms.py`` holds the figures it printed on torch 2.13 CPU.
"""

from __future__ import annotations

import peft
import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

CONFIG = LlamaConfig(
    hidden_size=256, intermediate_size=688, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=1,
    vocab_size=1000, attn_implementation="sdpa",
)  # fmt: skip
TARGETS = (("q_proj", "v_proj"), ("q_proj", "k_proj", "v_proj", "o_proj"))


class OneLayer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = LlamaDecoderLayer(CONFIG, 0)
        self.rope = LlamaRotaryEmbedding(CONFIG)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(hidden.shape[1]).unsqueeze(0)
        cos, sin = self.rope(hidden, positions)
        out = self.layer(hidden, position_embeddings=(cos, sin), attention_mask=None, position_ids=positions)
        return out[0] if isinstance(out, tuple) else out


def saved_bytes(targets: tuple[str, ...], dropout: float, autocast: bool) -> tuple[int, str]:
    torch.manual_seed(0)
    model = OneLayer().to(torch.bfloat16)
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    config = LoraConfig(r=8, lora_alpha=16, lora_dropout=dropout, target_modules=list(targets))
    model = get_peft_model(model, config, autocast_adapter_dtype=autocast)
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    adapter_dtype = next(str(p.dtype) for p in model.parameters() if p.requires_grad)
    hidden = torch.randn(2, 128, 256, dtype=torch.bfloat16, requires_grad=True)
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters and storage.data_ptr() != hidden.untyped_storage().data_ptr():
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(hidden)
    return sum(storages.values()), adapter_dtype


def main() -> None:
    print(f"torch {torch.__version__}, peft {peft.__version__}")
    for targets in TARGETS:
        for dropout in (0.0, 0.1):
            for autocast in (False, True):
                saved, dtype = saved_bytes(targets, dropout, autocast)
                label = f"{'+'.join(targets)} dropout {dropout} autocast_adapter_dtype {autocast}"
                print(f"{label:60s} adapters {dtype:15s} saved {saved:>10,} B")


if __name__ == "__main__":
    main()
