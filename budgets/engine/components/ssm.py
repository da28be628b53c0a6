"""Activation memory of the Mamba mixers (`Mixer.kind == "mamba"`) as transformers 5.24 runs them in PyTorch.

The path: no `mamba-ssm` / `causal-conv1d` packages and no Hub kernels, so every `@use_kernel_func_from_hub_with_
fallback` function of the modeling files runs its reference body (transformers logs "falling back to its reference
PyTorch implementation"); `mamba2_split_conv1d_scan_combined` (the fused training shortcut) returns None there, so
training takes the same unfused path. With the kernels installed (CUDA) the scan is fused (`selective_scan_fn`,
`mamba_chunk_scan_combined`) and none of the b·s·inner·state / chunk² intermediates below exist; those kernels are
not modelled here.

- "mamba1": Jamba (`modeling_jamba.py` `JambaMambaMixer.forward` :508-624, `mamba_selective_scan` :321-439,
  `mamba_selective_state_update` :280-318, `causal_conv1d_fn` :240-259). The full-sequence scan discretises the
  whole sequence at once in fp32: `discrete_A`, `discrete_B`, `deltaB_u` (b × inner × s × state each, :378-380),
  then loops over tokens keeping every per-token output (b × inner, in the input dtype) and stacks them.
- "mamba2": `mamba2_chunk_scan` (identical in `modeling_nemotron_h.py` :274-385, granitemoehybrid and falcon_h1),
  called by `NemotronHMamba2Mixer.forward` :468-612, `GraniteMoeHybridMambaLayer.forward` (same body) and
  `FalconH1Mixer.forward` (+ `ssm_in_multiplier` and `mup_vector` products, the gated RMSNorm optional:
  `mamba_rms_norm`, else `y · silu(gate)`). s is padded to c·chunk (c = ceil(s/chunk)); the scan runs in fp32.

Symbols: b sequences, s new tokens, T = b·s, T' = b·c·chunk, I = inner, N = state_dim, R = rank (dt rank),
K = kernel, H = heads, P = head_dim, G = groups, L = chunk, C = I + 2·G·N (conv channels), d = bytes of the compute
dtype. A mixed-dtype binary op (a bf16 tensor with an fp32 one) first copies the bf16 operand to fp32 on the CPU
(TensorIterator's common-dtype cast): that is each `d < 4` term named "cast".

The cache (transformers 5.24 `cache_utils.py` `LinearAttentionLayer`, the layer type `DynamicCache` builds for
these models' mamba layers, :1210-1298): the conv state is `zeros(b, C, K)` in the model dtype (K positions, not
vLLM's K − 1; :1226), allocated by the prefill call before its peak; the SSM state is `zeros_like(final_state)`,
fp32 (b × I × N for mamba1, b × H × P × N for mamba2; the scans return fp32), allocated after the prefill's peak.
`cache_state_bytes` is what one prefill call leaves alive besides its output; a decode call leaves nothing (both
states are updated in place).
"""

from __future__ import annotations

from ..models.layers import Mixer

FP32 = 4


def _cast(d: float) -> int:
    """1 when a bf16/fp16 operand is copied to fp32 first (the compute dtype is not fp32)."""
    return 1 if d < FP32 else 0


def _m2(mixer: Mixer) -> tuple[int, int, int, int, int, int, int]:
    """(I, H, P, G, N, L, C) of a Mamba2 mixer."""
    i, n, g = mixer.inner, mixer.state_dim, mixer.groups or 1
    heads = mixer.heads or 1
    p = mixer.head_dim or i // heads
    return i, heads, p, g, n, mixer.chunk or 256, i + 2 * g * n


def conv_state_bytes(mixer: Mixer, b: int, d: float) -> float:
    """The cache's conv state: b × channels × kernel in the model dtype (LinearAttentionLayer.lazy_initialization)."""
    channels = mixer.inner if mixer.variant == "mamba1" else _m2(mixer)[6]
    return b * channels * mixer.kernel * d


def ssm_state_bytes(mixer: Mixer, b: int) -> float:
    """The cache's SSM state, fp32: zeros_like of the scan's final state."""
    if mixer.variant == "mamba1":
        return b * mixer.inner * mixer.state_dim * FP32
    i, _, _, _, n, _, _ = _m2(mixer)
    return b * i * n * FP32


def cache_state_bytes(mixer: Mixer, b: int, d: float) -> float:
    """What the prefill call leaves alive besides its output: the two cache states it allocates."""
    return conv_state_bytes(mixer, b, d) + ssm_state_bytes(mixer, b)


def forward_transient(
    mixer: Mixer,
    b: int,
    s: int,
    h: int,
    d: float,
    gated_norm: bool = True,
    new_state: bool = True,
    falcon: bool = False,
) -> float:
    """Peak above the entry level of a prefill call (no grad, s tokens from an empty cache). It includes the conv
    state the call allocates before its peak (`new_state=False` leaves it out, for an engine that counts the cache
    states as live already). `falcon` (FalconH1Mixer) changes nothing here: its `ssm_in_multiplier` copy is freed
    before the scan and the `mup_vector` product (model dtype) replaces the in_proj output."""
    t = b * s
    conv = conv_state_bytes(mixer, b, d) if new_state else 0
    if mixer.variant == "mamba1":
        i, n = mixer.inner, mixer.state_dim  # (the dt-rank tensors are freed before the scan)
        return (
            t * 2 * i * d  # in_proj output (projected_states, :526), alive to the end
            + i * n * FP32  # A = -exp(A_log.float()) (:530)
            + conv
            + t * i * d  # causal conv1d + silu (the conv's (s + K − 1) output is freed by the slice + silu)
            + 2 * t * n * d  # B and C after their RMSNorms (:572-573)
            + t * i * d  # time_step = dt_proj.weight @ time_step.T (:580)
            + 2 * i * FP32 * _cast(d)  # dt_proj.bias.float() and D.float() (:581, :607)
            + t * i * d  # dt = softplus(dt + bias) (:372-374; the sum is freed)
            + 3 * t * i * n * FP32  # discrete_A, discrete_B, deltaB_u (:378-380)
            + t * i * d  # the per-token outputs list (b × I each, :427-429)
            + b * i * n * FP32  # the running ssm_state (fp32 from the first step)
            + t * i * d  # torch.stack of the outputs (:430)
            # the D skip (:432-433): hidden_states * D (fp32), the stacked output's cast, their sum
            + t * i * FP32 * (2 + _cast(d))
        )
    i, heads, p, g, n, chunk, c_dim = _m2(mixer)
    c = -(-s // chunk)
    tp = b * c * chunk  # padded tokens
    proj = 2 * i + 2 * g * n + heads
    # Falcon-H1's `hidden_states * ssm_in_multiplier` copy is freed before the scan (the name is rebound by the
    # split) and its mup product replaces the in_proj output: no change at the peak
    return (
        t * proj * d  # in_proj output (projected_states)
        + heads * FP32  # A
        + conv
        + t * c_dim * d  # conv1d + silu
        + t * heads * d  # dt after softplus and clamp
        # mamba2_chunk_scan, all fp32: D_residual, the discretised x chunked (pad copy), Y_diag, C·states, Y_off,
        # Y_diag + Y_off and its .contiguous() copy
        + 7 * tp * i * FP32
        + 4 * tp * heads * FP32  # A chunked, A_cumsum, decay_states, state_decay_out
        + 3 * tp * heads * n * FP32  # B and C repeated to the heads and chunked, B_decay
        + 3 * b * c * chunk * chunk * heads * FP32  # L = exp(segment_sum(A)), G, M
        + b * heads * p * n * FP32  # previous (zero) states
        + b * (c + 1) * heads * p * n * FP32  # new_states
        + b * heads * (c + 1) ** 2 * FP32  # decay_chunk
    )


def decode_transient(mixer: Mixer, b: int, h: int, d: float, gated_norm: bool = True, falcon: bool = False) -> float:
    """Peak above the entry level of a one-token call with a filled cache (the single-step recurrence,
    `*_selective_state_update`, and `causal_conv1d_update`): at the new state's sum."""
    if mixer.variant == "mamba1":
        i, n = mixer.inner, mixer.state_dim
        return (
            b * 2 * i * d  # in_proj
            + i * n * FP32  # A
            + b * i * d  # conv update + silu
            + 2 * b * n * d  # B, C normed
            + b * i * d  # time_step
            + i * FP32 * _cast(d)  # dt_proj.bias.float()
            + b * i * d  # softplus(dt + bias)
            + 5 * b * i * n * FP32  # dA, dB, dBx, state·dA, + dBx (:298-305)
        )
    i, heads, _, g, n, _, c_dim = _m2(mixer)
    proj = 2 * i + 2 * g * n + heads
    return (
        b * proj * d
        + heads * FP32
        + b * c_dim * d  # conv update + silu
        + b * i * d  # softplus(dt + dt_bias) over heads × head_dim
        + b * i * n * FP32  # dA
        + b * heads * n * d  # B expanded to the heads (.contiguous())
        + 2 * b * i * n * d  # dB, dBx (model dtype)
        + b * i * n * FP32 * (2 + _cast(d))  # state·dA, dBx's cast, the sum
    )


def saved(mixer: Mixer, b: int, s: int, h: int, d: float, gated_norm: bool = True, falcon: bool = False) -> float:
    """Bytes the training forward leaves for backward (input and output excluded). `falcon`: in_proj saves the
    `hidden_states * ssm_in_multiplier` copy (b·s·h) instead of the mixer input."""
    t = b * s
    k = mixer.kernel
    if mixer.variant == "mamba1":
        i, n, r = mixer.inner, mixer.state_dim, mixer.rank
        per = b * i * n  # one scan state
        states = (s - 1) * per * FP32 + per * d + (s * per * d if d < FP32 else per * FP32)
        return (
            t * 2 * i * d  # in_proj output (conv input and the gate)
            + b * i * (s + k - 1) * d  # conv output (silu's input)
            + t * i * d  # silu output
            + t * i * d * (b > 1)  # x_proj's input made contiguous (b = 1: the transposed view reshapes as a view)
            + t * (r + 2 * n) * (FP32 + d)
            + 3 * t * FP32  # the three RMSNorms: fp32 input, cast output, rsqrt
            + t * r * d
            + t * n * d  # dt normed (dt_proj's input), C normed (the per-token matmuls')
            + 2 * i * n * FP32  # exp(A_log), A
            + 2 * t * i * d  # dt + bias (softplus input), softplus output
            + t * n * FP32  # B.float()
            + 2 * t * i * n * FP32  # discrete_A, discrete_B
            + states  # the per-token states (fp32) and their casts for the output matmuls
            + t * i * FP32 * _cast(d)
            + i * FP32 * _cast(d)  # hidden_states.float(), D.float()
            + t * i * FP32  # the D-skip sum (the gate product's input)
            + t * i * d  # silu(z)
            + t * i * d  # out_proj's input
        )
    i, heads, p, g, n, chunk, c_dim = _m2(mixer)
    c = -(-s // chunk)
    tp = b * c * chunk
    proj = 2 * i + 2 * g * n + heads
    # gated RMSNorm: gate product, rsqrt product, silu(gate) in fp32 (+ gate's fp32 copy), rsqrt, out_proj's input;
    # without it (Falcon-H1 `mamba_rms_norm: false`): silu(gate) and out_proj's input
    norm = (3 + _cast(d)) * t * i * FP32 + t * i * d + t * g * FP32 if gated_norm else 2 * t * i * d
    return (
        (t * h * d if falcon else 0)
        + t * proj * d
        + b * c_dim * (s + k - 1) * d  # conv output
        + (t * i * FP32 if d < FP32 else t * c_dim * d)  # hidden_states.float() (fp32: the silu output itself)
        + 2 * t * heads * d
        + t * heads * FP32 * (1 + _cast(d))  # dt: + bias, softplus, clamp / its fp32 copies
        + 2 * heads * FP32  # A
        + 3 * tp * i * FP32  # padded copies
        + 2 * tp * i * FP32  # an einsum output and the scan output
        + 3 * b * c * chunk * chunk * heads * FP32  # L, G, M
        + 5 * tp * heads * n * FP32  # B, C chunked and their einsum copies, B_decay
        + b * c * heads * p * n * FP32
        + b * (c + 1) * heads * p * n * FP32  # states, cat
        + 2 * tp * heads * FP32
        + b * heads * (c + 1) ** 2 * FP32  # decays
        + 2 * chunk * chunk
        + 2 * (c + 1) ** 2  # segment_sum's bool masks
        + norm
    )


def backward_transient(
    mixer: Mixer, b: int, s: int, h: int, d: float, gated_norm: bool = True, falcon: bool = False
) -> float:
    """Peak during the mixer's backward above the level at its start (saved + output gradient + input), the
    weights' gradients left out (the engine's gradient component) and the input's gradient counted."""
    t = b * s
    if mixer.variant == "mamba1":
        i, n = mixer.inner, mixer.state_dim
        # the token loop's backward: select_backward turns each step's slice gradient into a zero-filled full
        # b × I × s × N fp32 tensor, for discrete_A and deltaB_u, accumulated (three alive at once)
        # (+ C's gradient); in half precision the D-skip sum and two per-token casts are released by then
        return 3 * t * i * n * FP32 + t * n * d - _cast(d) * (t * i * FP32 + 2 * b * i * n * d)
    i, heads, _, g, n, chunk, _ = _m2(mixer)
    c = -(-s // chunk)
    tp = b * c * chunk
    # the gated RMSNorm's backward (five b·s·I fp32 tensors) while its saved tensors are released; byte-exact for
    # Nemotron-H / Granite (norm after the gate). Falcon-H1's norm (gate after the norm) and its no-norm branch
    # peak elsewhere: approximated by the chunk scan's backward, dominated by the gradients of M = G·L
    # (two b·c·L²·H fp32 tensors beyond M itself) -- within about 1 % without the norm, not exact with it
    norm = 4 * t * i * FP32 - t * g * FP32 - t * i * d if gated_norm else 0
    scan = 2 * b * c * chunk * chunk * heads * FP32 - 2 * tp * heads * n * FP32 - tp * i * FP32 - tp * heads * FP32
    return max(norm, scan)
