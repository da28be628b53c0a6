"""budgets/engine/components/mla.py against measured figures.

The figures come from `python -m benchmarks.mixers.mla --raw` (transformers 5.24.0, torch 2.13.0 CPU, profiler
replay; `python -m benchmarks.mixers.mla` prints measured vs formula)."""

from __future__ import annotations

import pytest

from budgets.engine.components import mla
from budgets.engine.models.layers import Mixer


def _mixer(heads, q_rank, latent, nope, rope, v, index_heads=0, index_dim=0) -> Mixer:
    return Mixer(
        "mla",
        heads,
        1,
        nope + rope,
        v,
        latent_dim=latent,
        rope_dim=rope,
        index_dim=index_dim,
        q_rank=q_rank,
        index_heads=index_heads,
    )


R10 = _mixer(4, 64, 64, 64, 32, 64)
R10_V32 = _mixer(4, 64, 64, 64, 32, 64, 4, 64)
NOQ = _mixer(6, 0, 96, 32, 16, 32)
WIDE = _mixer(8, 48, 80, 48, 16, 32)
V32_FP32 = _mixer(3, 48, 48, 32, 16, 32, 2, 32)

# (mixer, b, s, h, d, topk, prefill, decode) measured
INFERENCE = [
    (R10, 4, 256, 256, 2, 64, 19_337_220, 6_089_536),
    (R10_V32, 4, 256, 256, 2, 64, 78_118_912, 6_095_184),
    (NOQ, 2, 128, 192, 4, 64, 3_622_404, 1_005_488),
    (WIDE, 3, 96, 320, 2, 64, 5_476_612, 2_189_472),
    (V32_FP32, 2, 160, 192, 4, 40, 8_232_960, 629_092),
]
# (mixer, b, s, h, d, topk, saved, forward peak) measured
TRAINING = [
    (R10, 2, 256, 256, 2, 64, 4_984_832, 11_147_268),
    (R10_V32, 2, 256, 256, 2, 64, 4_984_832, 39_620_608),
    (NOQ, 2, 128, 192, 4, 64, 2_081_792, 4_131_332),
    (WIDE, 3, 96, 320, 2, 64, 2_803_968, 6_444_288),
    (V32_FP32, 2, 160, 192, 4, 40, 1_620_480, 8_542_720),
]


@pytest.mark.parametrize(("m", "b", "s", "h", "d", "topk", "prefill", "decode"), INFERENCE)
def test_forward_transient_matches_measurement(m, b, s, h, d, topk, prefill, decode):
    assert mla.forward_transient(m, b, s, s, h, d, topk=topk) == pytest.approx(prefill, rel=1e-3)
    assert mla.forward_transient(m, b, 1, s + 1, h, d, topk=topk) == pytest.approx(decode, rel=1e-3)


@pytest.mark.parametrize(("m", "b", "s", "h", "d", "topk", "saved", "peak"), TRAINING)
def test_training_matches_measurement(m, b, s, h, d, topk, saved, peak):
    assert mla.saved(m, b, s, h, d, topk=topk) == pytest.approx(saved, rel=1e-3)
    assert mla.train_forward_transient(m, b, s, h, d, topk=topk) == pytest.approx(peak, rel=1e-3)


def test_cache_is_the_latent_not_per_head_keys():
    # measured DynamicCache bytes after the round-10 prefill: 196,608 (V3) and 327,680 (V3.2) for 4 × 256 tokens
    assert 4 * 256 * R10.kv_elements_per_token() * 2 == 196_608
    assert 4 * 256 * R10_V32.kv_elements_per_token() * 2 == 327_680


def test_saved_closed_form_and_indexer_not_saved():
    b, s, d, n = 2, 256, 2, 512
    closed = 2 * (n * (4 + 2 * d) * 64 + 4 * n) + 4 * b * 4 * s * (2 * 96 + s + 64) + n * 4 * 64 * d
    assert mla.saved(R10, b, s, 256, d) == closed
    assert mla.saved(R10_V32, b, s, 256, d, topk=64) == closed  # the indexer runs under no_grad


def test_math_path_rules():
    assert mla.math_path(R10)  # qk 96 ≠ v 64: no CPU flash kernel
    assert not mla.math_path(_mixer(4, 0, 64, 32, 32, 64))  # equal head sizes: CPU flash
    assert not mla.math_path(R10, cuda=True)  # memory-efficient kernel accepts v ≠ qk
    # the indexer broadcast grows as b × s² × index_dim: quadrupling s multiplies the prefill by well over 4
    assert mla.forward_transient(R10_V32, 4, 1024, 1024, 256, 2, topk=64) > 10 * mla.forward_transient(
        R10_V32, 4, 256, 256, 256, 2, topk=64
    )


# eager attention (`eager_attention_forward`), measured by `python -m benchmarks.mixers.mla --raw --shape r12-v3-eager
# --shape r12-glm-eager --shape v3-noqlora-fp32-eager --shape v3-wide-bf16-eager --shape r10-v3-train-eager --shape
# v3-noqlora-fp32-train-eager --shape r12-glm-train-eager` (`python -m benchmarks.mixers.mla --shape ...` for the
# comparison). bf16 decode adds oneDNN's bf16 bmm scratch of the probabilities @ v matmul (freed inside the bmm, read
# off the profiler events: 69,248 B at b × heads × k × v = 2 × 4 × 201 × 64, 40,576 at 3 × 8 × 97 × 32), which the
# module leaves out with the other mkldnn scratch: recorded here as measured − scratch.
R12_GLM = _mixer(4, 128, 64, 48, 16, 64)  # glm4_moe_lite: qk 48 + 16 = v 64 (SDPA would run the CPU flash kernel)
# (mixer, b, s, h, d, prefill, decode, decode scratch) measured
EAGER_INFERENCE = [
    (R10, 2, 200, 256, 2, 4_710_400, 1_003_664, 69_248),
    (R12_GLM, 2, 200, 256, 2, 4_288_000, 847_952, 69_248),
    (NOQ, 2, 128, 192, 4, 3_063_820, 905_648, 0),
    (WIDE, 3, 96, 320, 2, 3_594_240, 873_712, 40_576),
]
# (mixer, b, s, h, d, saved, forward peak) measured
EAGER_TRAINING = [
    (R10, 2, 256, 256, 2, 4_984_840, 7_737_352),
    (NOQ, 2, 128, 192, 4, 2_081_800, 3_277_836),
    (R12_GLM, 3, 136, 256, 2, 2_797_256, 3_972_296),
]


@pytest.mark.parametrize(("m", "b", "s", "h", "d", "prefill", "decode", "scratch"), EAGER_INFERENCE)
def test_eager_forward_transient_matches_measurement(m, b, s, h, d, prefill, decode, scratch):
    assert mla.forward_transient(m, b, s, s, h, d, attention="eager") == pytest.approx(prefill, rel=1e-3)
    assert mla.forward_transient(m, b, 1, s + 1, h, d, attention="eager") == pytest.approx(decode - scratch, rel=1e-3)


@pytest.mark.parametrize(("m", "b", "s", "h", "d", "saved", "peak"), EAGER_TRAINING)
def test_eager_training_matches_measurement(m, b, s, h, d, saved, peak):
    assert mla.saved(m, b, s, h, d, attention="eager") == pytest.approx(saved, rel=1e-3)
    assert mla.train_forward_transient(m, b, s, h, d, attention="eager") == pytest.approx(peak, rel=1e-3)


def test_eager_closed_form_and_sdpa_difference():
    # bf16 eager keeps query, key, v copy, bf16 probabilities and the fp32 softmax instead of SDPA's fp32 qs, ks,
    # softmax and v: equal exactly at s = 2 qk + v (256 for R10), less below
    b, s, d, n = 3, 136, 2, 3 * 136
    norms = 2 * (n * (4 + 2 * d) * 64 + 4 * n) + n * 4 * 64 * d
    eager = norms + b * 4 * s * ((2 * 96 + 64) * d + 4 * s + s * d)
    assert mla.saved(R10, b, s, 256, d, attention="eager") == eager
    assert mla.saved(R10, 2, 256, 256, d, attention="eager") == mla.saved(R10, 2, 256, 256, d)
    assert mla.saved(R10, b, s, 256, d, attention="eager") < mla.saved(R10, b, s, 256, d)
    # eager runs the same on equal head sizes (no fused kernel to fall back on)
    assert not mla.math_path(R12_GLM)
    assert mla.forward_transient(R12_GLM, 2, 200, 200, 256, 2, attention="eager") > 2 * mla.forward_transient(
        R12_GLM, 2, 200, 200, 256, 2
    )


def test_a_fused_kernel_keeps_q_k_v_the_output_and_the_log_sum_exp_and_grows_with_the_batch():
    """CUDA's memory-efficient kernel (or the CPU flash kernel at equal head sizes): no score matrix is kept."""
    one = mla.saved(R10, 1, 256, 256, 2, cuda=True)
    assert one > 0 and mla.saved(R10, 2, 256, 256, 2, cuda=True) == pytest.approx(2 * one)
    assert one < mla.saved(R10, 1, 256, 256, 2)  # the math path keeps fp32 scores and probabilities
    assert mla.train_forward_transient(R10, 1, 256, 256, 2, cuda=True) == one
