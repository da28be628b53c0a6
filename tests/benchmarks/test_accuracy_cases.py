"""Pure checks of the accuracy benchmark's case lists and report layout (no torch needed)."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest

from benchmarks.accuracy import cases


def _names(ws):
    return [c["name"] for c in ws]


def _before_round7():
    """The cases written before round 7: the 17 original ones and rounds 1 to 5."""
    return cases.TUNING_CASES[: 17 + 11 + 11 + 12 + 126 + 126]


def test_holdout_and_tuning_sets_are_disjoint_and_cover_cases():
    original = _names(cases.CASES[:17])
    round1 = _names(cases.HOLDOUT_ROUND1_CASES)
    round2 = _names(cases.HOLDOUT_ROUND2_CASES)
    round3 = _names(cases.HOLDOUT_ROUND3_CASES)
    round4 = _names(cases.ROUND4_CASES)
    round5 = _names(cases.ROUND5_CASES)
    round7 = _names(cases.ROUND7_CASES)
    round8 = _names(cases.ROUND8_CASES)
    round10 = _names(cases.ROUND10_CASES)
    round11 = _names(cases.ROUND11_CASES)
    round12 = _names(cases.ROUND12_CASES)
    round13 = _names(cases.ROUND13_CASES)
    round14 = _names(cases.ROUND14_CASES)
    tuning = _names(cases.TUNING_CASES)
    holdout = _names(cases.HOLDOUT_CASES)
    # tuning set = the 17 original cases + the round-1 to round-5, 7, 8 and 10 to 14 hold-outs (each moved up after
    # its first comparison in HOLDOUT.md), in that order; round 8: the optimizer's device default, config dropouts
    sizes = (len(round1), len(round2), len(round3), len(round4), len(round5), len(round7), len(round8))
    later = (len(round10), len(round11), len(round12), len(round13), len(round14))
    assert (*sizes, *later) == (11, 11, 12, 126, 126, 56, 11, 52, 52, 52, 52, 81)
    earlier = original + round1 + round2 + round3 + round4 + round5 + round7 + round8
    assert tuning == earlier + round10 + round11 + round12 + round13 + round14
    assert len(set(tuning)) == 659
    # hold-out: round 6, one run per path per model type on new configs, none shared with tuning; round 9: round
    # 8's mechanisms on new models and paths; round 15: round 14's families changed by one rule, three runs each;
    # round 16: the remote-code families through stand-ins, three runs per config
    assert holdout == _names(
        cases.round6_cases() + cases.round9_cases() + cases.round15_cases() + cases.round16_cases()
    )
    assert len(set(holdout)) == len(holdout) == 56 + 10 + 81 + 12
    assert not set(tuning) & set(holdout)
    assert _names(cases.CASES) == tuning + holdout
    assert all(cases.is_holdout(n) for n in holdout)
    assert not any(cases.is_holdout(n) for n in tuning)


def test_holdout_workloads_differ_from_every_tuning_workload():
    def body(w):
        return json.dumps({k: v for k, v in w.items() if k != "name"}, sort_keys=True)

    tuning = {body(w) for w in cases.TUNING_CASES}
    assert not any(body(w) in tuning for w in cases.HOLDOUT_CASES)
    assert len({body(w) for w in cases.HOLDOUT_CASES}) == len(cases.HOLDOUT_CASES)


def _axes(w):
    if w["task"] == "inference":
        i = w["inference"]
        path = "gen-" + i["kv_cache_layout"]
        batch = i["concurrent_sessions"]
    else:
        t = w["training"]
        path = "train-" + t["activation_checkpointing"]
        batch = t["micro_batch_size"]
    return path, w["precision"]["weights"], w["runtime"]["attention"], batch


@pytest.mark.parametrize(("designed", "batches"), [("ROUND4_CASES", (1, 4)), ("ROUND5_CASES", (1, 6))])
def test_designed_rounds_cover_every_model_type_and_axis_value_in_balance(designed, batches):
    from budgets.engine.models import SUPPORTED_MODEL_TYPES

    round_cases = getattr(cases, designed)
    # every supported model_type is either sampled or excluded with a reason (the harness cannot build it)
    assert set(cases.ROUND4_MODEL_TYPES) | set(cases.ROUND4_EXCLUDED_MODEL_TYPES) == set(SUPPORTED_MODEL_TYPES)
    assert not set(cases.ROUND4_MODEL_TYPES) & set(cases.ROUND4_EXCLUDED_MODEL_TYPES)
    per_type = Counter(w["model"]["hf_config"]["model_type"] for w in round_cases)
    assert set(per_type) == set(cases.ROUND4_MODEL_TYPES)
    assert set(per_type.values()) == {9}
    axes = [_axes(w) for w in round_cases]
    values = (
        ("gen-dynamic", "gen-contiguous", "train-none", "train-full"),
        ("fp32", "bf16"),
        ("eager", "sdpa"),
        batches,
    )
    n = len(axes)
    for i, vals in enumerate(values):
        count = Counter(a[i] for a in axes)
        assert set(count) == set(vals)
        for v in vals:  # each value within 20 % of its even share
            assert abs(count[v] - n / len(vals)) <= 0.2 * n / len(vals), (vals, count)
    # per model_type: every path twice or more, each other axis value at least 4 of 9
    # (attention excepted for the types without SDPA), and no run twice
    for mt in cases.ROUND4_MODEL_TYPES:
        mine = [_axes(w) for w in round_cases if w["model"]["hf_config"]["model_type"] == mt]
        assert len(set(mine)) == 9
        assert min(Counter(a[0] for a in mine)[p] for p in values[0]) >= 2
        for i in (1, 3) if mt in cases.ROUND4_NO_SDPA else (1, 2, 3):
            assert min(Counter(a[i] for a in mine)[v] for v in values[i]) >= 4


def test_round5_models_differ_from_round4_by_its_rule():
    for mt, cfg in cases.ROUND4_CONFIGS.items():
        new = cases.round5_config(cfg)
        assert new["tie_word_embeddings"] is not cfg["tie_word_embeddings"]
        assert new["vocab_size"] > cfg["vocab_size"]
        kv, heads = new.get("num_key_value_heads"), new.get("num_attention_heads", new.get("n_head"))
        if kv is not None:
            assert kv != cfg["num_key_value_heads"] and heads % kv == 0, mt
        else:
            assert heads == 2 * cfg.get("num_attention_heads", cfg.get("n_head")), mt


@pytest.mark.parametrize("designed", ["ROUND6_CASES", "ROUND7_CASES"])
def test_rounds_6_and_7_take_every_path_of_every_model_type_once_with_both_precisions(designed):
    for mt in cases.ROUND4_MODEL_TYPES:
        mine = [_axes(w) for w in getattr(cases, designed) if w["model"]["hf_config"]["model_type"] == mt]
        assert sorted(a[0] for a in mine) == sorted(("gen-dynamic", "gen-contiguous", "train-none", "train-full"))
        assert Counter(a[1] for a in mine) == {"fp32": 2, "bf16": 2}


def test_round7_trains_with_sgd_on_models_and_batches_no_earlier_round_used():
    earlier = _before_round7() + cases.ROUND6_CASES
    shapes = {json.dumps(w["model"]["hf_config"], sort_keys=True) for w in earlier}
    for w in cases.ROUND7_CASES:
        assert json.dumps(w["model"]["hf_config"], sort_keys=True) not in shapes
        if w["task"] == "training":
            t = w["training"]
            expected = "sgd" if t["activation_checkpointing"] == "full" else "sgd_momentum"
            assert t["optimizer"] == expected
    assert {_axes(w)[3] for w in cases.ROUND7_CASES} == {1, 3}
    # the designed rounds 4 to 6 trained with AdamW only
    designed = cases.ROUND4_CASES + cases.ROUND5_CASES + cases.ROUND6_CASES
    assert {w["training"]["optimizer"] for w in designed if w["task"] == "training"} == {"adamw"}


def test_round4_design_is_pairwise_balanced_and_the_cosets_tile_the_grid():
    cells = set()
    for k in range(4):
        runs = cases.coset(k)
        for i, j in itertools.combinations(range(5), 2):
            assert Counter((r[i], r[j]) for r in runs) == {(0, 0): 2, (0, 1): 2, (1, 0): 2, (1, 1): 2}
        cells |= set(runs)
    assert len(cells) == 32
    assert cases.round4_design(0)[:8] == cases.coset(0) and cases.round5_design(0)[:8] == cases.coset(1)


def test_holdout_cases_use_only_what_the_harness_runs():
    for w in cases.HOLDOUT_CASES:
        p = w["precision"]
        assert p["weights"] == p["compute"]
        assert w["model"]["hf_config"]["model_type"] not in cases.ROUND4_EXCLUDED_MODEL_TYPES
        if w["model"]["hf_config"]["model_type"] in cases.ROUND4_NO_SDPA:
            assert w["runtime"]["attention"] == "eager"
        if w["task"] == "training":
            t = w["training"]
            assert p["gradients"] == p["weights"] and p["master_weights"] is None
            assert t["optimizer"] in ("adamw", "sgd", "sgd_momentum")
            assert t["activation_checkpointing"] in ("none", "full")
            assert t["method"] == "full"
            assert t.get("optimizer_impl") in (None, "foreach", "for_loop", "fused")
        else:
            assert w["inference"]["kv_cache_layout"] in ("dynamic", "contiguous")
            assert w["inference"]["engine"] == "transformers"
        assert w["runtime"]["device"] == "cpu"


def test_every_case_is_recorded_in_results_json():
    from benchmarks.accuracy.__main__ import RESULTS

    recorded = json.loads(RESULTS.read_text())["cases"]
    for c in cases.CASES:
        m = recorded[c["name"]]
        assert m["measured_peak_bytes"] > 0
        assert m["replay"]["unmatched_frees"] == 0
        assert m["baseline_bytes"] == m["known_live_at_window_start"]


def test_report_shows_each_set_and_overall():
    from benchmarks.accuracy.__main__ import load_results, report

    text, _ = report(load_results())
    assert "### Tuning set (659 cases" in text
    assert "### Round-6 hold-out (" in text
    assert "Round-6 hold-out: median |error|" in text
    assert "### Round-9 hold-out (10 cases" in text
    assert "### Round-15 hold-out (81 cases" in text
    assert "- All cases: median |error|" in text


def test_round8_leaves_the_optimizer_to_torch_or_turns_dropouts_on():
    def dropouts(w):
        cfg = w["model"]["hf_config"]
        keys = ("attn_pdrop", "resid_pdrop", "embd_pdrop", "dropout", "attention_dropout", "hidden_dropout")
        return {k: cfg[k] for k in keys if k in cfg}

    training = [w["training"] for w in cases.ROUND8_CASES]
    assert {t["optimizer"] for t in training} == {"adamw", "sgd_momentum"}
    default = [w for w in cases.ROUND8_CASES if "optimizer_impl" not in w["training"]]
    assert len({w["model"]["hf_config"]["model_type"] for w in default}) == 3
    assert all(not any(dropouts(w).values()) for w in default)
    with_dropout = [w for w in cases.ROUND8_CASES if "dropout" in w["name"] and "nodropout" not in w["name"]]
    # GPT-2 and OPT leave their dropout keys out (library defaults 0.1), the others set them
    assert {w["model"]["hf_config"]["model_type"] for w in with_dropout} == {"gpt2", "opt", "gpt_neox", "llama", "phi3"}
    assert all(w["training"]["optimizer_impl"] == "foreach" for w in with_dropout)


def test_rounds_1_to_7_state_the_foreach_optimizers_they_ran():
    earlier = _before_round7() + cases.ROUND6_CASES + cases.ROUND7_CASES
    assert {w["training"]["optimizer_impl"] for w in earlier if w["task"] == "training"} == {"foreach"}


def test_round9_runs_round8s_mechanisms_on_models_no_earlier_round_used():
    earlier = _before_round7() + cases.ROUND6_CASES + cases.ROUND7_CASES + cases.ROUND8_CASES
    shapes = {json.dumps(w["model"]["hf_config"], sort_keys=True) for w in earlier}
    for w in cases.ROUND9_CASES:
        assert w["task"] == "training"
        assert json.dumps(w["model"]["hf_config"], sort_keys=True) not in shapes
        cfg, t = w["model"]["hf_config"], w["training"]
        keys = ("attn_pdrop", "resid_pdrop", "embd_pdrop", "dropout", "attention_dropout", "hidden_dropout")
        dropout = cfg["model_type"] in ("gpt2", "opt") or any(cfg.get(k) for k in keys)
        assert dropout or "optimizer_impl" not in t  # each case runs at least one of the two mechanisms
    assert len({w["model"]["hf_config"]["model_type"] for w in cases.ROUND9_CASES}) == 10


@pytest.mark.parametrize(
    ("impl", "runs"), [(None, "for_loop"), ("foreach", "foreach"), ("for_loop", "for_loop"), ("fused", "fused")]
)
def test_the_harness_runs_the_stated_optimizer_or_torchs_cpu_default(impl, runs):
    torch = pytest.importorskip("torch")
    from benchmarks.accuracy.measure import make_optimizer, resolved_optimizer_impl

    params = list(torch.nn.Linear(4, 4).parameters())
    assert resolved_optimizer_impl(make_optimizer("adamw", params, impl), params) == runs


# --- round 10: the families read per layer ------------------------------------------------------------------------

ROUND10_FAMILIES = [
    "deepseek_v3",
    "deepseek_v32",
    "kimi_linear",
    "glm4_moe",
    "glm4_moe_lite",
    "gpt_oss",
    "phimoe",
    "granite",
    "granitemoehybrid",
    "olmo2",
    "smollm3",
    "falcon_h1",
    "cohere",
    "jamba",
    "nemotron_h",
    "minimax_m2",
    "exaone4",
    "ernie4_5",
    "qwen3_next",
    "qwen3_5",
    "qwen3_5_moe",
    "llama4",
    "mllama",
    "qwen2_5_vl",
    "qwen3_vl",
    "mistral3",
]


def _text(cfg):
    return cfg.get("text_config", cfg)


def test_round10_has_every_family_read_per_layer_or_says_why_not():
    from budgets.engine.models.hf_defaults import LAYERED_RULES, MULTIMODAL_TEXT

    assert list(cases.ROUND10_CONFIGS) == ROUND10_FAMILIES
    # every family the engine reads per layer is in the round (by its rules' key) or left out with a reason
    read = {MULTIMODAL_TEXT.get(f, f) for f in cases.ROUND10_CONFIGS}
    read |= {_text(c)["model_type"] for c in cases.ROUND10_CONFIGS.values()}
    left_out = set(LAYERED_RULES) - {"generic"} - read
    assert {MULTIMODAL_TEXT.get(f, f) for f in cases.ROUND10_NOT_BUILT} == left_out | {"qwen3_vl_moe_text"}
    assert all(cases.ROUND10_NOT_BUILT.values())


def test_round10_configs_follow_the_shrinking_rule():
    def walk(d, path=""):  # the language model's keys (the towers' widths follow their own hidden size)
        for k, v in d.items():
            yield f"{path}{k}", v
            if isinstance(v, dict) and k != "vision_config":
                yield from walk(v, f"{path}{k}.")

    for family, cfg in cases.ROUND10_CONFIGS.items():
        text = _text(cfg)
        assert text["hidden_size"] == 256 and text["num_attention_heads"] == 4, family
        assert text.get("num_key_value_heads", 4) in (2, 4), family
        assert 2 <= text["num_hidden_layers"] <= 4, family
        assert text["vocab_size"] == 2000 and (text["bos_token_id"], text["eos_token_id"]) == (1, 2), family
        for key, value in walk(cfg):
            name = key.rsplit(".", 1)[-1]
            assert "quantization_config" not in key and name != "use_mtp", (family, key)
            if "dropout" in name or "jitter" in name:
                assert value == 0, (family, key)
            if name in ("sliding_window", "attention_chunk_size", "chunk_size", "mamba_chunk_size", "index_topk"):
                assert value in (None, 64), (family, key)
            if name in ("head_dim", "v_head_dim", "linear_key_head_dim", "linear_value_head_dim", "mamba_d_head"):
                assert value == 64 or (family == "falcon_h1" and name == "mamba_d_head"), (family, key)
            if name in ("num_experts", "num_local_experts", "n_routed_experts"):
                assert value == 4, (family, key)
            if name in ("num_experts_per_tok", "num_experts_per_token", "experts_per_token"):
                assert value == (1 if family == "llama4" else 2), (family, key)
            if name in ("ssm_state_size", "mamba_d_state"):
                assert value == 16, (family, key)
            if name in ("intermediate_size", "moe_intermediate_size", "intermediate_size_mlp", "kv_lora_rank"):
                assert value % 64 == 0 and value >= 64, (family, key)


def test_round10_runs_generate_and_train_once_per_family():
    sessions, prompt, new = cases.ROUND10_GEN_SHAPE
    micro_batch, seq = cases.ROUND10_TRAIN_SHAPE
    assert len(cases.ROUND10_CASES) == 2 * len(ROUND10_FAMILIES) == 52
    for family, gen, trn in zip(ROUND10_FAMILIES, cases.ROUND10_CASES[::2], cases.ROUND10_CASES[1::2], strict=True):
        assert gen["model"]["hf_config"] == trn["model"]["hf_config"] == cases.ROUND10_CONFIGS[family]
        attention = "eager" if family in cases.ROUND10_NO_SDPA else "sdpa"
        for w in (gen, trn):
            assert w["precision"]["weights"] == w["precision"]["compute"] == "bf16"
            assert w["runtime"] == {"device": "cpu", "attention": attention}
        i = gen["inference"]
        assert (i["concurrent_sessions"], i["max_input_tokens"], i["max_output_tokens"]) == (sessions, prompt, new)
        assert i["kv_cache_layout"] == "dynamic" and i["engine"] == "transformers"
        t = trn["training"]
        assert (t["micro_batch_size"], t["sequence_length"]) == (micro_batch, seq)
        assert (t["optimizer"], t["optimizer_impl"], t["activation_checkpointing"]) == ("adamw", "foreach", "none")
    # no earlier case ran any of these model types
    before = _before_round7() + cases.ROUND6_CASES + cases.ROUND7_CASES + cases.ROUND8_CASES + cases.ROUND9_CASES
    earlier = {_text(w["model"]["hf_config"])["model_type"] for w in before}
    assert not earlier & {_text(c)["model_type"] for c in cases.ROUND10_CONFIGS.values()} - {"mistral"}


def test_round11_runs_round10s_configs_on_the_other_side_of_its_run_axes():
    sessions, prompt, new = cases.ROUND11_GEN_SHAPE
    micro_batch, seq = cases.ROUND11_TRAIN_SHAPE
    assert (sessions, prompt, new) != cases.ROUND10_GEN_SHAPE and (micro_batch, seq) != cases.ROUND10_TRAIN_SHAPE
    assert all(prompt % chunk and seq % chunk for chunk in (64, 128, 256))  # no chunked scan divides them
    assert len(cases.ROUND11_CASES) == 2 * len(ROUND10_FAMILIES) == 52
    for family, gen, trn in zip(ROUND10_FAMILIES, cases.ROUND11_CASES[::2], cases.ROUND11_CASES[1::2], strict=True):
        assert gen["model"]["hf_config"] == trn["model"]["hf_config"] == cases.ROUND10_CONFIGS[family]
        i, t = gen["inference"], trn["training"]
        assert (i["concurrent_sessions"], i["max_input_tokens"], i["max_output_tokens"]) == (sessions, prompt, new)
        assert gen["precision"]["compute"] == "bf16" and trn["precision"]["compute"] == "fp32"
        assert (t["micro_batch_size"], t["sequence_length"]) == (micro_batch, seq)
        assert (t["optimizer"], t["activation_checkpointing"]) == ("adamw", "full")


def test_round12_gives_every_family_eager_and_sdpa_once_on_a_third_side_of_the_run_axes():
    assert len(cases.ROUND12_CASES) == 52
    shapes = {cases.ROUND10_GEN_SHAPE, cases.ROUND11_GEN_SHAPE, cases.ROUND12_GEN_SHAPE}
    assert len(shapes) == 3 and all(cases.ROUND12_GEN_SHAPE[1] % chunk for chunk in (64, 128, 256))
    assert all(cases.ROUND12_TRAIN_SHAPE[1] % chunk for chunk in (64, 128, 256))
    for family, gen, trn in zip(ROUND10_FAMILIES, cases.ROUND12_CASES[::2], cases.ROUND12_CASES[1::2], strict=True):
        assert gen["model"]["hf_config"] == trn["model"]["hf_config"] == cases.ROUND10_CONFIGS[family]
        attentions = {gen["runtime"]["attention"], trn["runtime"]["attention"]}
        assert attentions == ({"eager"} if family in cases.ROUND10_NO_SDPA else {"eager", "sdpa"}), family
        assert trn["training"]["optimizer"] == "sgd_momentum" and trn["precision"]["compute"] == "bf16"


def test_round13_flips_round12s_attention_and_runs_a_fourth_side_of_the_axes():
    assert len(cases.ROUND13_CASES) == 52
    shapes = {cases.ROUND10_GEN_SHAPE, cases.ROUND11_GEN_SHAPE, cases.ROUND12_GEN_SHAPE, cases.ROUND13_GEN_SHAPE}
    assert len(shapes) == 4
    assert all(cases.ROUND13_GEN_SHAPE[1] % c and cases.ROUND13_TRAIN_SHAPE[1] % c for c in (64, 128, 256))
    for earlier, later in zip(cases.ROUND12_CASES, cases.ROUND13_CASES, strict=True):
        family = next(f for f, c in cases.ROUND10_CONFIGS.items() if c == later["model"]["hf_config"])
        if family not in cases.ROUND10_NO_SDPA:
            assert earlier["runtime"]["attention"] != later["runtime"]["attention"], later["name"]
    gens = cases.ROUND13_CASES[::2]
    assert {w["precision"]["compute"] for w in gens} == {"fp32"}
    assert {w["training"]["activation_checkpointing"] for w in cases.ROUND13_CASES[1::2]} == {"full"}


def test_round14_runs_three_new_sides_of_the_axes_on_round10s_families_and_gemma4():
    families = [*ROUND10_FAMILIES, "gemma4"]
    assert list(cases.ROUND14_CONFIGS) == families
    assert all(cases.ROUND14_CONFIGS[f] is cases.ROUND10_CONFIGS[f] for f in ROUND10_FAMILIES)
    assert "gemma4" not in cases.ROUND10_CONFIGS
    assert len(cases.ROUND14_CASES) == 3 * len(families) == 81
    # shapes no earlier family round ran, none a multiple of a chunk
    gens = {getattr(cases, f"ROUND{r}_GEN_SHAPE") for r in (10, 11, 12, 13)}
    trains = {getattr(cases, f"ROUND{r}_TRAIN_SHAPE") for r in (10, 11, 12, 13)}
    assert cases.ROUND14_GEN_SHAPE not in gens
    assert not {cases.ROUND14_CKPT_TRAIN_SHAPE, cases.ROUND14_ADAMW_TRAIN_SHAPE} & trains
    lengths = (cases.ROUND14_GEN_SHAPE[1], cases.ROUND14_CKPT_TRAIN_SHAPE[1], cases.ROUND14_ADAMW_TRAIN_SHAPE[1])
    assert lengths == (333, 420, 150)
    assert all(n % chunk for n in lengths for chunk in (64, 128, 256))
    runs = zip(cases.ROUND14_CASES[::3], cases.ROUND14_CASES[1::3], cases.ROUND14_CASES[2::3], strict=True)
    for index, (family, (gen, ckpt, adamw)) in enumerate(zip(families, runs, strict=True)):
        for w in (gen, ckpt, adamw):
            assert w["name"].startswith(f"r14-{family.replace('_', '')}-")
            assert w["model"]["hf_config"] == cases.ROUND14_CONFIGS[family]
        for run, w in enumerate((gen, ckpt, adamw)):  # eager for run index % 3, SDPA otherwise
            eager = family in cases.ROUND10_NO_SDPA or index % 3 == run
            assert w["runtime"] == {"device": "cpu", "attention": "eager" if eager else "sdpa"}, w["name"]
        i = gen["inference"]
        assert (i["concurrent_sessions"], i["max_input_tokens"], i["max_output_tokens"]) == (1, 333, 7)
        assert i["kv_cache_layout"] == "dynamic" and gen["precision"]["compute"] == "bf16"
        t = ckpt["training"]
        assert (t["micro_batch_size"], t["sequence_length"], t["optimizer"]) == (1, 420, "sgd_momentum")
        assert (t["activation_checkpointing"], t["optimizer_impl"]) == ("full", "foreach")
        assert ckpt["precision"]["compute"] == "bf16"
        t = adamw["training"]
        assert (t["micro_batch_size"], t["sequence_length"], t["optimizer"]) == (2, 150, "adamw")
        assert t["activation_checkpointing"] == "none" and "optimizer_impl" not in t  # torch's device default
        assert adamw["precision"]["compute"] == "fp32"
    # Gemma 4 by round 10's rule: the wrapper (its causal LM in transformers 5.24) with a shrunk vision tower
    g4 = cases.ROUND14_CONFIGS["gemma4"]
    text = g4["text_config"]
    assert g4["model_type"] == "gemma4" and text["model_type"] == "gemma4_text" and g4["audio_config"] is None
    assert (text["hidden_size"], text["num_attention_heads"], text["num_key_value_heads"]) == (256, 4, 2)
    assert (text["head_dim"], text["global_head_dim"], text["num_global_key_value_heads"]) == (64, 128, 2)
    assert text["layer_types"] == ["sliding_attention", "full_attention"] and text["sliding_window"] == 64
    assert (text["num_experts"], text["top_k_experts"], text["moe_intermediate_size"]) == (4, 2, 64)
    assert text["intermediate_size"] == 192 and text["enable_moe_block"] and text["attention_k_eq_v"]
    assert text["vocab_size"] == 2000 and (text["bos_token_id"], text["eos_token_id"]) == (1, 2)
    assert (g4["vision_config"]["hidden_size"], g4["vision_config"]["num_hidden_layers"]) == (128, 2)
    # the model types round 14 runs: round 10's and Gemma 4's
    assert {_text(w["model"]["hf_config"])["model_type"] for w in cases.ROUND14_CASES} == {
        _text(c)["model_type"] for c in cases.ROUND10_CONFIGS.values()
    } | {"gemma4_text"}


def test_round14_measurements_are_of_the_run_with_the_stated_or_default_optimizer():
    from benchmarks.accuracy.__main__ import RESULTS

    recorded = json.loads(RESULTS.read_text())["cases"]
    for w in cases.ROUND14_CASES:
        m = recorded[w["name"]]
        assert m["setup"]["end"] == m["weights_bytes"], w["name"]
        assert m["baseline_bytes"] == m["known_live_at_window_start"]
        assert m["versions"]["transformers"] == "5.24.0" and m["versions"]["torch"].startswith("2.13.0")
        if w["task"] == "training":
            assert m["optimizer_impl"] == w["training"].get("optimizer_impl", "for_loop"), w["name"]
        else:
            assert m["generated_tokens"] == 7
    gemma4 = [recorded[w["name"]] for w in cases.ROUND14_CASES if w["name"].startswith("r14-gemma4-")]
    assert len(gemma4) == 3
    assert all(m["model_class"] == "Gemma4ForConditionalGeneration" and m["tower_param_count"] for m in gemma4)


def test_round15_runs_round14s_families_changed_by_its_rule_on_three_new_sides_of_the_axes():
    families = [*ROUND10_FAMILIES, "gemma4"]
    assert list(cases.ROUND15_CONFIGS) == families
    assert len(cases.ROUND15_CASES) == 3 * len(families) == 81
    # shapes no earlier family round ran, none a multiple of a chunk
    gens = {getattr(cases, f"ROUND{r}_GEN_SHAPE") for r in (10, 11, 12, 13, 14)}
    trains = {getattr(cases, f"ROUND{r}_TRAIN_SHAPE") for r in (10, 11, 12, 13)}
    trains |= {cases.ROUND14_CKPT_TRAIN_SHAPE, cases.ROUND14_ADAMW_TRAIN_SHAPE}
    assert cases.ROUND15_GEN_SHAPE == (3, 150, 12) and cases.ROUND15_GEN_SHAPE not in gens
    assert (cases.ROUND15_ADAMW_TRAIN_SHAPE, cases.ROUND15_CKPT_TRAIN_SHAPE) == ((1, 500), (2, 100))
    assert not {cases.ROUND15_ADAMW_TRAIN_SHAPE, cases.ROUND15_CKPT_TRAIN_SHAPE} & trains
    lengths = (cases.ROUND15_GEN_SHAPE[1], cases.ROUND15_ADAMW_TRAIN_SHAPE[1], cases.ROUND15_CKPT_TRAIN_SHAPE[1])
    assert all(n % chunk for n in lengths for chunk in (64, 128, 256))
    # the rule: vocabulary 3,001 and every stated MLP width x 1.5 (rounded up to 8) in the language model's config;
    # nothing else changed, the towers' configs included
    scaled = set()
    for family in families:
        old, new = cases.ROUND14_CONFIGS[family], cases.ROUND15_CONFIGS[family]
        assert old["model_type"] == new["model_type"]
        text_old, text_new = _text(old), _text(new)
        assert text_old["vocab_size"] == 2000 and text_new["vocab_size"] == 3001, family
        for key in set(text_old) | set(text_new):
            if key in cases.ROUND15_WIDTHS:
                assert text_new[key] == -(-3 * text_old[key] // 16) * 8 == text_old[key] * 3 // 2, (family, key)
                scaled.add(key)
            elif key != "vocab_size":
                assert text_new.get(key) == text_old.get(key), (family, key)
        if "text_config" in new:  # the wrapper's own keys and its towers' configs as they were
            assert {k: v for k, v in new.items() if k != "text_config"} == {
                k: v for k, v in old.items() if k != "text_config"
            }, family
        assert (text_new["bos_token_id"], text_new["eos_token_id"], text_new["pad_token_id"]) == (1, 2, 0)
    assert scaled == set(cases.ROUND15_WIDTHS)
    assert cases.ROUND15_CONFIGS["llama4"]["intermediate_size_mlp"] == 1248
    assert cases.ROUND15_CONFIGS["qwen2_5_vl"]["vision_config"] == cases.ROUND14_CONFIGS["qwen2_5_vl"]["vision_config"]
    g4 = cases.ROUND15_CONFIGS["gemma4"]
    assert g4["vision_config"] == cases.ROUND14_GEMMA4["vision_config"]
    assert (g4["text_config"]["intermediate_size"], g4["text_config"]["moe_intermediate_size"]) == (288, 96)
    assert g4["text_config"]["vocab_size_per_layer_input"] == 2000  # unused: no per-layer inputs
    # the earlier rounds' configs are untouched by the rule
    assert _text(cases.ROUND14_GEMMA4)["vocab_size"] == 2000
    assert all(_text(c)["vocab_size"] == 2000 for c in cases.ROUND10_CONFIGS.values())
    runs = zip(cases.ROUND15_CASES[::3], cases.ROUND15_CASES[1::3], cases.ROUND15_CASES[2::3], strict=True)
    for index, (family, (gen, adamw, sgd)) in enumerate(zip(families, runs, strict=True)):
        for w in (gen, adamw, sgd):
            assert w["name"].startswith(f"r15-{family.replace('_', '')}-")
            assert w["model"]["hf_config"] == cases.ROUND15_CONFIGS[family]
        # eager for (a) at index % 3 == 2, (b) at 0, (c) at 1; SDPA otherwise; no-SDPA families always eager
        for run, w in enumerate((gen, adamw, sgd)):
            eager = family in cases.ROUND10_NO_SDPA or index % 3 == (2, 0, 1)[run]
            assert w["runtime"] == {"device": "cpu", "attention": "eager" if eager else "sdpa"}, w["name"]
        i = gen["inference"]
        assert (i["concurrent_sessions"], i["max_input_tokens"], i["max_output_tokens"]) == (3, 150, 12)
        assert i["kv_cache_layout"] == "dynamic" and gen["precision"]["compute"] == "bf16"
        t = adamw["training"]
        assert (t["micro_batch_size"], t["sequence_length"], t["optimizer"]) == (1, 500, "adamw")
        assert (t["activation_checkpointing"], t["optimizer_impl"]) == ("none", "foreach")
        assert adamw["precision"]["compute"] == "bf16"
        t = sgd["training"]
        assert (t["micro_batch_size"], t["sequence_length"], t["optimizer"]) == (2, 100, "sgd")
        assert (t["activation_checkpointing"], t["optimizer_impl"]) == ("full", "foreach")
        assert sgd["precision"]["compute"] == "fp32"
    assert any(w["name"].startswith("r15-gemma4-") for w in cases.ROUND15_CASES)
    # no earlier case ran any of these configs
    before = [w for w in cases.CASES if not w["name"].startswith("r15-")]
    earlier = {json.dumps(w["model"]["hf_config"], sort_keys=True) for w in before}
    assert not earlier & {json.dumps(c, sort_keys=True) for c in cases.ROUND15_CONFIGS.values()}


def test_round15_measurements_are_of_the_run_with_the_stated_optimizer():
    from benchmarks.accuracy.__main__ import RESULTS

    recorded = json.loads(RESULTS.read_text())["cases"]
    for w in cases.ROUND15_CASES:
        m = recorded[w["name"]]
        assert m["measured_peak_bytes"] > 0 and m["replay"]["unmatched_frees"] == 0, w["name"]
        assert m["setup"]["end"] == m["weights_bytes"], w["name"]
        assert m["baseline_bytes"] == m["known_live_at_window_start"]
        assert m["versions"]["transformers"] == "5.24.0" and m["versions"]["torch"].startswith("2.13.0")
        if w["task"] == "training":
            assert m["optimizer_impl"] == w["training"]["optimizer_impl"] == "foreach", w["name"]
        else:
            assert m["generated_tokens"] == 12
    gemma4 = [recorded[w["name"]] for w in cases.ROUND15_CASES if w["name"].startswith("r15-gemma4-")]
    assert len(gemma4) == 3
    assert all(m["model_class"] == "Gemma4ForConditionalGeneration" and m["tower_param_count"] for m in gemma4)


def test_round10_measurements_are_of_the_run_not_the_initialisation():
    from benchmarks.accuracy.__main__ import RESULTS

    recorded = json.loads(RESULTS.read_text())["cases"]
    for w in cases.ROUND10_CASES:
        m = recorded[w["name"]]
        # the model's build is recorded apart, before the window, and left nothing but the model live
        assert m["setup"]["end"] == m["weights_bytes"], w["name"]
        assert m["baseline_bytes"] == m["known_live_at_window_start"]
        assert m["versions"]["transformers"] == "5.24.0" and m["versions"]["torch"].startswith("2.13.0")
        vl = _text(w["model"]["hf_config"])["model_type"] != w["model"]["hf_config"]["model_type"] or (
            w["model"]["hf_config"]["model_type"] == "qwen2_5_vl"
        )
        assert bool(m.get("tower_param_count")) == (vl and w["model"]["hf_config"]["model_type"] != "mllama")


# --- round 16: the remote-code families (kimi_k2, mimo, nemotron-nas) through stand-ins ----------------------------


def test_round16_runs_the_families_round10_could_not_build_on_new_shapes():
    assert list(cases.ROUND16_CONFIGS) == ["kimi_k2", "mimo", "nemotron_nas", "nemotron_nas_linear"]
    types = [c["model_type"] for c in cases.ROUND16_CONFIGS.values()]
    assert types == ["kimi_k2", "mimo", "nemotron-nas", "nemotron-nas"]
    assert set(types) == {"kimi_k2", "mimo", "nemotron-nas"} <= set(cases.ROUND10_NOT_BUILT)
    assert len(cases.ROUND16_CASES) == 12
    # shapes no earlier family round ran, no length a multiple of 64
    gens = {getattr(cases, f"ROUND{r}_GEN_SHAPE") for r in (10, 11, 12, 13, 14, 15)}
    trains = {getattr(cases, f"ROUND{r}_TRAIN_SHAPE") for r in (10, 11, 12, 13)}
    trains |= {cases.ROUND14_CKPT_TRAIN_SHAPE, cases.ROUND14_ADAMW_TRAIN_SHAPE}
    trains |= {cases.ROUND15_CKPT_TRAIN_SHAPE, cases.ROUND15_ADAMW_TRAIN_SHAPE}
    assert cases.ROUND16_GEN_SHAPE == (2, 190, 9) and cases.ROUND16_GEN_SHAPE not in gens
    assert (cases.ROUND16_ADAMW_TRAIN_SHAPE, cases.ROUND16_CKPT_TRAIN_SHAPE) == ((1, 330), (2, 140))
    assert not {cases.ROUND16_ADAMW_TRAIN_SHAPE, cases.ROUND16_CKPT_TRAIN_SHAPE} & trains
    lengths = (cases.ROUND16_GEN_SHAPE[1], cases.ROUND16_ADAMW_TRAIN_SHAPE[1], cases.ROUND16_CKPT_TRAIN_SHAPE[1])
    assert all(n % 64 for n in lengths)
    runs = zip(cases.ROUND16_CASES[::3], cases.ROUND16_CASES[1::3], cases.ROUND16_CASES[2::3], strict=True)
    for index, (family, (gen, adamw, ckpt)) in enumerate(zip(cases.ROUND16_CONFIGS, runs, strict=True)):
        for run, w in enumerate((gen, adamw, ckpt)):
            assert w["name"].startswith(f"r16-{family.replace('_', '')}-")
            assert w["model"]["hf_config"] == cases.ROUND16_CONFIGS[family]
            eager = index % 3 == (run + 1) % 3  # eager_offset 1: one eager run per config
            assert w["runtime"] == {"device": "cpu", "attention": "eager" if eager else "sdpa"}, w["name"]
        i = gen["inference"]
        assert (i["concurrent_sessions"], i["max_input_tokens"], i["max_output_tokens"]) == (2, 190, 9)
        assert i["kv_cache_layout"] == "dynamic" and gen["precision"]["compute"] == "bf16"
        t = adamw["training"]
        assert (t["micro_batch_size"], t["sequence_length"], t["optimizer"]) == (1, 330, "adamw")
        assert (t["activation_checkpointing"], t["optimizer_impl"]) == ("none", "foreach")
        assert adamw["precision"]["compute"] == "bf16"
        t = ckpt["training"]
        assert (t["micro_batch_size"], t["sequence_length"], t["optimizer"]) == (2, 140, "sgd_momentum")
        assert (t["activation_checkpointing"], t["optimizer_impl"]) == ("full", "foreach")
        assert ckpt["precision"]["compute"] == "fp32"
    # round 10's shrinking rule on the real configs' values
    kimi, mimo = cases.ROUND16_CONFIGS["kimi_k2"], cases.ROUND16_CONFIGS["mimo"]
    # the keys round 10 kept for DeepSeek-V3, with the values where Kimi K2's published config differs
    published = (
        "model_type",
        "n_group",
        "routed_scaling_factor",
        "max_position_embeddings",
        "rope_theta",
        "rope_scaling",
    )
    deepseek = cases.ROUND10_CONFIGS["deepseek_v3"]
    assert set(kimi) == set(deepseek)
    assert {k: v for k, v in kimi.items() if k not in published} == {
        k: v for k, v in deepseek.items() if k not in published
    }
    assert (kimi["max_position_embeddings"], kimi["rope_theta"], kimi["rope_scaling"]["factor"]) == (
        131072,
        50000.0,
        32.0,
    )
    assert (kimi["n_routed_experts"], kimi["num_experts_per_tok"], kimi["n_shared_experts"]) == (4, 2, 1)
    assert (kimi["q_lora_rank"], kimi["kv_lora_rank"], kimi["v_head_dim"], kimi["qk_rope_head_dim"]) == (64, 64, 64, 32)
    assert (kimi["n_group"], kimi["topk_group"], kimi["routed_scaling_factor"]) == (1, 1, 2.827)
    assert (mimo["num_key_value_heads"], mimo["head_dim"], mimo["intermediate_size"]) == (2, 64, 704)
    assert mimo["num_nextn_predict_layers"] == 1 and mimo["attention_bias"] is True
    for family in ("nemotron_nas", "nemotron_nas_linear"):
        cfg = cases.ROUND16_CONFIGS[family]
        assert len(cfg["block_configs"]) == cfg["num_hidden_layers"] == 4
        assert cfg["num_key_value_heads"] is None and cfg["intermediate_size"] is None
        assert not cfg["block_configs"][0]["attention"]["no_op"]  # generate reads the cache length from layer 0
    # no earlier case ran any of these model types
    before = [w for w in cases.CASES if not w["name"].startswith("r16-")]
    assert not {_text(w["model"]["hf_config"])["model_type"] for w in before} & set(types)


def test_round16_measures_each_remote_code_family_with_its_stand_in_only():
    pytest.importorskip("torch")
    pytest.importorskip("transformers")  # the bench extra
    from benchmarks.accuracy.measure import REMOTE_CODE_STAND_INS, build_config, model_class

    assert set(REMOTE_CODE_STAND_INS) == {"kimi_k2", "mimo", "nemotron-nas"}
    classes = {}
    for family, hf in cases.ROUND16_CONFIGS.items():
        cfg = build_config(hf, "sdpa")
        classes[family] = (cfg.model_type, getattr(model_class(cfg), "__name__", None))
    assert classes["kimi_k2"] == ("deepseek_v3", "AutoModelForCausalLM")
    assert classes["mimo"] == ("qwen2", "AutoModelForCausalLM")
    assert classes["nemotron_nas"] == classes["nemotron_nas_linear"] == ("nemotron-nas", "DeciLMForCausalLM")
    # every other type keeps its own class
    assert build_config(cases.ROUND10_CONFIGS["deepseek_v3"], "sdpa").model_type == "deepseek_v3"
    assert build_config(cases.QWEN2, "sdpa").model_type == "qwen2"


def test_the_decilm_stand_in_builds_the_blocks_as_decilm_does():
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")  # the bench extra
    from transformers import LlamaConfig, LlamaForCausalLM

    from benchmarks.accuracy.decilm import (
        DeciLMForCausalLM,
        UnsupportedBlock,
        decilm_config,
        ffn_mult_to_intermediate_size,
    )

    # DeciLM's width rule at Nemotron-Super's hidden size (its published widths) and at the round's 256
    widths = [ffn_mult_to_intermediate_size(m, 8192) for m in (5.25, 2.625, 3.28125, 1.3125, 1.0, 0.5)]
    assert widths == [28672, 14336, 17920, 7168, 5632, 2816]
    assert [ffn_mult_to_intermediate_size(m, 256) for m in (2.625, 1.3125, 5.25, 3.28125)] == [512, 256, 1024, 768]

    def build(hf):
        fields = {k: v for k, v in hf.items() if k != "model_type"}
        return DeciLMForCausalLM._from_config(decilm_config(fields), attn_implementation="sdpa")

    shapes = {n: tuple(p.shape) for n, p in build(cases.ROUND16_CONFIGS["nemotron_nas_linear"]).named_parameters()}
    layer = {
        i: {n.split(".", 3)[3]: s for n, s in shapes.items() if n.startswith(f"model.layers.{i}.")} for i in range(4)
    }
    assert layer[0]["self_attn.k_proj.weight"] == (256, 256) and layer[0]["mlp.gate_proj.weight"] == (256, 256)
    assert set(layer[1]) == {
        "input_layernorm.weight",
        "self_attn.linear_attn.weight",
        "post_attention_layernorm.weight",
        "mlp.gate_proj.weight",
        "mlp.up_proj.weight",
        "mlp.down_proj.weight",
    }
    assert layer[1]["self_attn.linear_attn.weight"] == (256, 256) and layer[1]["mlp.up_proj.weight"] == (512, 256)
    assert layer[2]["self_attn.v_proj.weight"] == (128, 256) and layer[2]["mlp.linear_mlp.weight"] == (256, 256)
    assert layer[3]["self_attn.k_proj.weight"] == (64, 256)
    assert not any(k.startswith(("mlp.", "post_attention_layernorm")) for k in layer[3])  # no-op FFN: no norm either
    nas = {n: tuple(p.shape) for n, p in build(cases.ROUND16_CONFIGS["nemotron_nas"]).named_parameters()}
    assert not any(n.startswith(("model.layers.1.self_attn", "model.layers.1.input_layernorm")) for n in nas)
    assert nas["model.layers.3.mlp.down_proj.weight"] == (256, 768)
    # blocks that are all Llama attention + MLP: the stand-in computes what LlamaForCausalLM computes
    block = cases.decilm_block({"n_heads_in_group": 2}, {"ffn_mult": 2.625})
    hf = {**cases.ROUND16_NAS_BASE, "num_hidden_layers": 2, "block_configs": [block, block]}
    ours = build(hf)
    llama_fields = {k: v for k, v in hf.items() if k not in ("model_type", "block_configs")}
    llama_fields |= {"num_key_value_heads": 2, "intermediate_size": 512}
    llama = LlamaForCausalLM._from_config(LlamaConfig(**llama_fields), attn_implementation="sdpa")
    assert sorted(llama.state_dict()) == sorted(ours.state_dict())
    llama.load_state_dict(ours.state_dict())
    ids = torch.randint(0, 2000, (2, 19))
    assert torch.equal(ours(ids).logits, llama(ids).logits)
    # what Llama modules cannot express is refused, not approximated
    sliding = cases.decilm_block({"n_heads_in_group": 2, "window_length": 64}, {"ffn_mult": 1.0})
    with pytest.raises(UnsupportedBlock):
        build({**hf, "block_configs": [block, sliding]})


def test_round16_measurements_are_of_the_stand_ins():
    from benchmarks.accuracy.__main__ import RESULTS

    recorded = json.loads(RESULTS.read_text())["cases"]
    expected = {"kimi_k2": "DeepseekV3ForCausalLM", "mimo": "Qwen2ForCausalLM", "nemotron-nas": "DeciLMForCausalLM"}
    for w in cases.ROUND16_CASES:
        m = recorded[w["name"]]
        model_type = w["model"]["hf_config"]["model_type"]
        assert m["measured_peak_bytes"] > 0 and m["replay"]["unmatched_frees"] == 0, w["name"]
        assert m["setup"]["end"] == m["weights_bytes"], w["name"]
        assert m["baseline_bytes"] == m["known_live_at_window_start"]
        assert m["versions"]["transformers"] == "5.24.0" and m["versions"]["torch"].startswith("2.13.0")
        assert m["model_class"] == expected[model_type] and m["stand_in"]["for"] == model_type, w["name"]
        assert m["attn_implementation"] == w["runtime"]["attention"]
        if w["task"] == "training":
            assert m["optimizer_impl"] == w["training"]["optimizer_impl"] == "foreach", w["name"]
        else:
            assert m["generated_tokens"] == 9
