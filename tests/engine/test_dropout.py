"""Config dropouts in training: which keys each model_type applies (transformers 5.24 defaults where a config
leaves them out), what each dropout keeps for backward, and how attention dropout moves CPU SDPA onto torch's
math attention (measured on torch 2.13 CPU against transformers 5.24 where they are installed)."""

from __future__ import annotations

from typing import Any

import pytest

from budgets.engine import Workload, estimate
from budgets.engine.components import activations as act
from budgets.engine.models.hf_config import from_hf_config

GPT2 = {"model_type": "gpt2", "n_layer": 2, "n_embd": 256, "n_head": 4, "vocab_size": 1000, "n_positions": 512}
BASE = {
    "num_hidden_layers": 2,
    "hidden_size": 256,
    "num_attention_heads": 4,
    "intermediate_size": 512,
    "vocab_size": 1000,
    "max_position_embeddings": 512,
}
LLAMA = {"model_type": "llama", **BASE, "num_key_value_heads": 2}
PHI3 = {"model_type": "phi3", **BASE, "num_key_value_heads": 4, "pad_token_id": 0, "eos_token_id": 0}
NEOX = {"model_type": "gpt_neox", **BASE}
OPT = {"model_type": "opt", **{k: v for k, v in BASE.items() if k != "intermediate_size"}, "ffn_dim": 512}


def _workload(cfg: dict, attention: str = "sdpa", precision: str = "bf16", device: str = "cpu", **training) -> dict:
    return {
        "task": "training",
        "model": {"hf_config": cfg},
        "precision": {"weights": precision},
        "training": {"micro_batch_size": 2, "sequence_length": 128, "optimizer_impl": "foreach", **training},
        "runtime": {"device": device, "attention": attention},
    }


def _backward_start(payload: dict) -> int:
    phases = estimate(Workload.model_validate(payload)).per_device.phases
    return next(p.bytes for p in phases if p.name == "backward")


def _dropout_line(payload: dict) -> str:
    return next(a for a in estimate(Workload.model_validate(payload)).assumptions if a.startswith("dropout"))


# --- which config keys are read ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cfg", "expected"),
    [
        (GPT2, (0.1, 0.1, 0.1)),  # GPT2Config: attn_pdrop, resid_pdrop, embd_pdrop default to 0.1
        ({**GPT2, "attn_pdrop": 0.0, "resid_pdrop": 0.2, "embd_pdrop": 0.0}, (0.0, 0.2, 0.0)),
        (OPT, (0.0, 0.1, 0.0)),  # OPTConfig: dropout 0.1 on both residual branches, attention_dropout 0.0
        ({**NEOX, "attention_dropout": 0.1, "hidden_dropout": 0.2}, (0.1, 0.2, 0.2)),  # emb_dropout: hidden
        ({**PHI3, "resid_pdrop": 0.1, "embd_pdrop": 0.1}, (0.0, 0.1, 0.0)),  # Phi3Model applies no embd_pdrop
        ({**LLAMA, "attention_dropout": 0.1}, (0.1, 0.0, 0.0)),
        ({**LLAMA, "attention_dropout": None}, (0.0, 0.0, 0.0)),
        (LLAMA, (0.0, 0.0, 0.0)),
        ({"model_type": "gemma3", "text_config": {**LLAMA, "attention_dropout": 0.1}}, (0.1, 0.0, 0.0)),
    ],
)
def test_the_dropout_keys_each_model_type_applies_are_read(cfg: dict, expected: tuple[float, float, float]) -> None:
    spec = from_hf_config(cfg)
    assert (spec.attention_dropout, spec.hidden_dropout, spec.embedding_dropout) == expected


def test_a_model_type_without_dropout_keys_reads_none() -> None:
    from budgets.engine.models.hf_config import _dropout

    assert _dropout({"attention_dropout": 0.1}, "some_future_type", "attention") == 0.0


@pytest.mark.parametrize("bad", [1.5, -0.1, "0.1", True])
def test_a_dropout_that_is_not_a_probability_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="'attn_pdrop' must be a dropout probability"):
        Workload.model_validate(_workload({**GPT2, "attn_pdrop": bad}))


def test_the_budget_names_the_dropouts_it_read_and_where_from() -> None:
    line = _dropout_line(_workload(GPT2))
    assert "attn_pdrop 0.1 (attention probabilities; transformers 5.24 default)" in line
    assert "resid_pdrop 0.1 (both residual branches of every layer; transformers 5.24 default)" in line
    assert "embd_pdrop 0.1 (embeddings; transformers 5.24 default)" in line
    assert "SDPA off its fused CPU kernel onto the math path" in line
    line = _dropout_line(_workload({**PHI3, "attention_dropout": 0.1, "resid_pdrop": 0.1, "embd_pdrop": 0.1}, "eager"))
    assert "resid_pdrop 0.1 (both residual branches of every layer; config)" in line
    assert "embd_pdrop 0.1 (read; no module applies it)" in line
    assert "eager attention keeps the dropout's mask and output" in line
    assert _dropout_line(_workload(LLAMA)).endswith("attention_dropout 0 (attention probabilities; transformers"
                                                    " 5.24 default); all 0: no dropout runs")  # fmt: skip
    assert "hidden_dropout 0 (both residual branches of every layer, embeddings" in _dropout_line(_workload(NEOX))
    preset = {"task": "training", "model": {"preset": "opt-13b"}, "training": {"sequence_length": 128}}
    assert "dropout 0.1 (both residual branches of every layer; transformers 5.24 default)" in _dropout_line(preset)


def test_an_architecture_and_lit_gpt_run_no_dropout() -> None:
    arch = {
        "num_layers": 2,
        "hidden_size": 256,
        "num_attention_heads": 4,
        "intermediate_size": 512,
        "vocab_size": 1000,
    }
    given = {"task": "training", "model": {"architecture": arch}, "training": {"sequence_length": 128}}
    assert _dropout_line(given) == "dropout: none (a given architecture carries no dropout settings)"
    litgpt = _workload(GPT2, framework="litgpt")
    assert _dropout_line(litgpt).startswith("dropout: none (lit-gpt's layers run no dropout")
    assert _backward_start(litgpt) == _backward_start(
        _workload({**GPT2, "attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0}, framework="litgpt")
    )


def test_dropouts_change_training_only() -> None:
    off = {**GPT2, "attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0}
    generate = {"task": "inference", "inference": {"engine": "transformers", "max_input_tokens": 128}}
    on_budget = estimate(Workload.model_validate({**generate, "model": {"hf_config": GPT2}}))
    off_budget = estimate(Workload.model_validate({**generate, "model": {"hf_config": off}}))
    assert on_budget.per_device.total_bytes == off_budget.per_device.total_bytes
    assert _backward_start(_workload(GPT2)) > _backward_start(_workload(off))


def test_on_cuda_dropouts_keep_bool_masks_and_sdpa_keeps_its_fused_kernels() -> None:
    # residual dropouts only (OPT's default): two bool masks per layer and token, 1 B per element
    off = {**OPT, "dropout": 0.0}
    tokens, layers, h = 2 * 128, 2, 256
    assert _backward_start(_workload(OPT, device="cuda")) - _backward_start(_workload(off, device="cuda")) == (
        2 * layers * tokens * h
    )
    # attention dropout under SDPA on CUDA: flash / memory-efficient take dropout_p, nothing score-sized
    llama = {**LLAMA, "attention_dropout": 0.1}
    assert _backward_start(_workload(llama, device="cuda")) == _backward_start(_workload(LLAMA, device="cuda"))
    # eager: the dropout's bool mask and its output replace the cast-back probabilities
    scores = 2 * 4 * 128 * 128
    eager = _backward_start(_workload(llama, "eager", device="cuda")) - _backward_start(
        _workload(LLAMA, "eager", device="cuda")
    )
    assert eager == layers * scores * 1


def test_compile_keeps_the_eager_layers_when_a_dropout_runs() -> None:
    llama = {**LLAMA, "attention_dropout": 0.1}
    compiled = {**_workload(llama, device="cuda"), "runtime": {"device": "cuda", "compile": True}}
    assert _backward_start(compiled) == _backward_start(_workload(llama, device="cuda"))


# --- measured on torch 2.13 CPU ----------------------------------------------------------------------


def _saved_storages(fn) -> dict[int, tuple[int, Any]]:
    """data_ptr -> (bytes, dtype) of every storage autograd saves while `fn` runs."""
    torch = pytest.importorskip("torch")
    saved: dict[int, tuple[int, Any]] = {}

    def pack(t):
        saved[t.untyped_storage().data_ptr()] = (t.untyped_storage().nbytes(), t.dtype)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return saved


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_cpu_dropout_keeps_its_noise_in_the_input_dtype(dtype: str) -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(8, 1024, dtype=getattr(torch, dtype), requires_grad=True)
    saved = _saved_storages(lambda: torch.nn.functional.dropout(x * 1, p=0.1, training=True))
    assert list(saved.values()) == [(x.numel() * act.dropout_mask_bytes(x.element_size(), cuda=False), x.dtype)]


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_cpu_sdpa_with_dropout_runs_the_math_path_and_keeps_three_fp32_scores(dtype: str) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    b, heads, s, hd = 2, 4, 128, 64
    # [b, H, s, hd] views of [b, s, H, hd] projections, as transformers hands them over
    q, k, v = (torch.randn(b, s, heads, hd, dtype=getattr(torch, dtype), requires_grad=True) for _ in range(3))
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))

    def sdpa(p: float):
        return lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)

    for p, kernel in ((0.0, "aten::_scaled_dot_product_flash_attention_for_cpu"),
                      (0.1, "aten::_scaled_dot_product_attention_math")):  # fmt: skip
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            sdpa(p)()
        assert kernel in {e.name for e in prof.events()}
    saved = _saved_storages(sdpa(0.1))
    given = {t.untyped_storage().data_ptr() for t in (q, k, v)}
    assert not given & set(saved)  # neither q, k nor v in the compute dtype
    assert {dt for _, dt in saved.values()} == {torch.float32}
    x = act.Shape(b=b, s=s, k=s, h=heads * hd, q=heads * hd, kv=heads * hd, heads=heads, inter=0, vocab=0, d=4)
    assert sum(n for n, _ in saved.values()) == act._sdpa_math_saved(x)


def _model_saved_bytes(cfg: dict, attention: str, dtype: str) -> int:
    """What autograd keeps in one training forward of the transformers model's base (no head), parameters apart."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    fields = {k: v for k, v in cfg.items() if k != "model_type"}
    config = transformers.AutoConfig.for_model(cfg["model_type"], **fields)
    model = transformers.AutoModelForCausalLM.from_config(
        config, attn_implementation=attention, dtype=getattr(torch, dtype)
    )
    model.train()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    ids = torch.randint(0, cfg["vocab_size"], (2, 128))
    saved = _saved_storages(lambda: model.base_model(input_ids=ids, use_cache=False))
    return sum(n for ptr, (n, _) in saved.items() if ptr not in params)


GPT2_OFF = {**GPT2, "attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0}


@pytest.mark.parametrize(
    ("on", "off", "attention", "precision"),
    [
        # fused qkv, learned positions: attention, residual and embedding dropouts
        (GPT2, GPT2_OFF, "sdpa", "bf16"),
        # GQA: k and v repeated inside the math path
        ({**LLAMA, "attention_dropout": 0.1}, LLAMA, "sdpa", "fp32"),
        # fused qkv, rope by cat: v's slice no longer keeps the projection output; embd_pdrop unapplied
        ({**PHI3, "attention_dropout": 0.1, "resid_pdrop": 0.1, "embd_pdrop": 0.1}, PHI3, "sdpa", "fp32"),
        ({**NEOX, "attention_dropout": 0.1, "hidden_dropout": 0.1}, NEOX, "eager", "bf16"),
        ({**OPT, "attention_dropout": 0.1}, {**OPT, "dropout": 0.0}, "eager", "fp32"),
    ],
    ids=["gpt2-sdpa-bf16", "llama-gqa-sdpa-fp32", "phi3-sdpa-fp32", "gpt_neox-eager-bf16", "opt-eager-fp32"],
)
def test_what_the_dropouts_add_is_what_transformers_keeps(on: dict, off: dict, attention: str, precision: str) -> None:
    dtype = {"bf16": "bfloat16", "fp32": "float32"}[precision]
    measured = _model_saved_bytes(on, attention, dtype) - _model_saved_bytes(off, attention, dtype)
    modelled = _backward_start(_workload(on, attention, precision)) - _backward_start(
        _workload(off, attention, precision)
    )
    assert measured > 0
    assert modelled == measured
