"""The synthetic acceptance workload (workers/runner/synthetic.py), run as the real child process.

Every torch run is a fresh ``python -m workers.runner.synthetic SPEC`` subprocess with a tiny model, its
result read from the report pipe (``VRAMPLAN_REPORT_FD``) or from stdout. The runs start together in one
module fixture (two at a time) so the file stays fast. The numbers are checked against things computed
independently of the child's measurement: the budget engine's parameter count, KV-cache bytes from the
shapes, orderings that must hold (more tokens never lower the peak, checkpointing lowers it), and an
in-process TorchDispatchMode storage tracker that sees the same run through a different mechanism.
"""

from __future__ import annotations

import json
import math
import os
import resource
import subprocess
import sys
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from budgets.engine import Workload, parameter_count

pytestmark = pytest.mark.slow  # runs the synthetic workload (PyTorch) in child processes

REPO_ROOT = Path(__file__).resolve().parents[2]
PHASES = {"build", "warmup", "prefill", "decode", "train", "quality"}

ARCH = {
    "num_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 128,
    "vocab_size": 256,
}
L, H, KV, HD, V = 2, 64, 2, 16, 256


def inference(layout: str = "contiguous", *, B: int = 2, Tin: int = 16, N: int = 8, weights: str = "bf16", **kw: Any):
    inf = {
        "max_input_tokens": Tin,
        "max_output_tokens": N,
        "concurrent_sessions": B,
        "engine": "generic",
        "kv_cache_layout": layout,
        "kv_block_tokens": 4,
    }
    w = {
        "task": "inference",
        "model": {"architecture": dict(ARCH)},
        "precision": {"weights": weights},
        "inference": inf,
        "runtime": {"device": "cpu"},
    }
    return {"workload": w, "device": "cpu", **kw}


def training(optimizer: str = "adamw", ckpt: str = "none", *, B: int = 2, T: int = 64, weights: str = "fp32", **kw):
    tr = {"micro_batch_size": B, "sequence_length": T, "optimizer": optimizer, "activation_checkpointing": ckpt}
    w = {
        "task": "training",
        "model": {"architecture": dict(ARCH)},
        "precision": {"weights": weights},
        "training": tr,
        "runtime": {"device": "cpu"},
    }
    return {"workload": w, "device": "cpu", **kw}


def huge_kv() -> dict:
    """16 GB of contiguous KV cache (4 GB per layer tensor) under a 3 GiB address-space cap: it cannot fit."""
    spec = inference("contiguous", B=64, Tin=8, N=500_000, weights="fp32", warmup_steps=0, quality=False)
    return spec


RUNS: dict[str, dict] = {
    "inf-contiguous": inference("contiguous"),
    "inf-dynamic-fp32": inference("dynamic", weights="fp32"),
    "inf-paged": inference("paged"),
    "inf-longer-output": inference("contiguous", N=16),
    "inf-more-sessions": inference("contiguous", B=4),
    "train-adamw": training("adamw"),
    "train-adamw-full": training("adamw", "full"),
    "train-adamw-selective": training("adamw", "selective"),
    "train-sgd": training("sgd"),
    "train-bf16-sgd": training("sgd", weights="bf16"),
}
BY_HAND = {"inf-dynamic-fp32"}  # run without a report fd: the result comes on stdout


def _limit_address_space() -> None:
    cap = 3 << 30
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def run_child(spec: dict, tmp: Path, *, pipe: bool = True, cap_memory: bool = False) -> dict[str, Any]:
    path = tmp / "spec.json"
    path.write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if k != "VRAMPLAN_REPORT_FD"}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONPATH=str(REPO_ROOT))
    read_fd = write_fd = None
    if pipe:
        read_fd, write_fd = os.pipe()
        env["VRAMPLAN_REPORT_FD"] = str(write_fd)
    proc = subprocess.Popen(
        [sys.executable, "-m", "workers.runner.synthetic", str(path)],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        pass_fds=(write_fd,) if pipe else (),
        preexec_fn=_limit_address_space if cap_memory else None,
    )
    lines: list[bytes] = []
    reader = None
    if pipe:
        os.close(write_fd)

        def drain() -> None:
            with os.fdopen(read_fd, "rb") as fh:
                lines.extend(fh.read().splitlines())

        reader = threading.Thread(target=drain)
        reader.start()
    out, err = proc.communicate(timeout=120)
    if reader is not None:
        reader.join(timeout=10)
    messages = [json.loads(line) for line in lines if line.strip()]
    results = [m for m in messages if m.get("type") == "result"]
    result = results[-1] if results else None
    if not pipe and out.strip():
        result = json.loads(out)
    return {
        "rc": proc.returncode,
        "result": result,
        "messages": messages,
        "stdout": out.decode(),
        "stderr": err.decode(),
        "n_results": len(results),
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    pytest.importorskip("torch")

    def one(name: str) -> tuple[str, dict[str, Any]]:
        tmp = tmp_path_factory.mktemp(name)
        return name, run_child(RUNS[name], tmp, pipe=name not in BY_HAND)

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, RUNS))


def ok(runs: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    r = runs[name]
    assert r["rc"] == 0, f"{name}: rc={r['rc']}\n{r['stderr'][-3000:]}"
    assert r["result"] is not None and r["result"]["oom"] is False
    return r["result"]


def peak(result: dict[str, Any]) -> int:
    return result["framework"]["allocated_bytes_peak"]


def expected_weight_bytes(spec: dict) -> int:
    w = Workload.model_validate(spec["workload"])
    return parameter_count(w.spec).total * {"fp32": 4, "bf16": 2, "fp16": 2}[w.precision.weights]


# --------------------------------------------------------------------------------------------
# the protocol and the result's shape
# --------------------------------------------------------------------------------------------


RESULT_KEYS = {
    "type",
    "oom",
    "framework",
    "weights_bytes",
    "timing",
    "quality",
    "quality_reason",
    "conditions",
    "versions",
}
FRAMEWORK_KEYS = {
    "allocated_bytes_peak",
    "reserved_bytes_peak",
    "inactive_split_bytes_peak",
    "num_alloc_retries",
    "num_ooms",
    "method",
    "reasons",
}


def test_result_message_protocol_and_keys(runs):
    r = runs["inf-paged"]
    result = ok(runs, "inf-paged")
    assert r["n_results"] == 1, "exactly one result message"
    assert r["stdout"].strip() == "", "with a report fd the child prints nothing on stdout"
    assert set(result) >= RESULT_KEYS
    assert set(result["framework"]) >= FRAMEWORK_KEYS
    fw = result["framework"]
    for key in ("reserved_bytes_peak", "inactive_split_bytes_peak", "num_alloc_retries", "num_ooms"):
        assert fw[key] is None and "no caching pool" in fw["reasons"][key]
    progress = [m for m in r["messages"] if m["type"] == "progress"]
    assert progress and {m["phase"] for m in progress} <= PHASES
    assert {"build", "prefill", "decode", "quality"} <= {m["phase"] for m in progress}
    assert all(0 <= m["percent"] <= 100 for m in progress)
    assert len(progress) < 60, "progress is rate-limited"
    # cuda_init and weights_loaded are CUDA instants; measured_end (the end of the measured window, before the
    # quality reference is built) is sent on every device, after the last measured step's progress.
    checkpoints = [m["name"] for m in r["messages"] if m["type"] == "checkpoint"]
    assert checkpoints == ["measured_end"]
    order = [m.get("name") or m.get("phase") for m in r["messages"] if m["type"] in ("checkpoint", "progress")]
    assert order.index("measured_end") < order.index("quality")
    c = result["conditions"]
    assert (c["task"], c["device"], c["batch"], c["input_tokens"], c["output_tokens"]) == ("inference", "cpu", 2, 16, 8)
    assert (c["layers"], c["hidden"], c["heads"], c["kv_heads"], c["head_dim"], c["vocab"]) == (L, H, 4, KV, HD, V)
    assert (c["kv_layout"], c["block_tokens"], c["attention"], c["seed"]) == ("paged", 4, "sdpa", 0)
    assert c["dtypes"]["weights"] == "bf16" and c["expandable_segments"] is False
    v = result["versions"]
    assert v["torch"].startswith("2.") and v["torch_cuda"] is None and v["nccl"] is None and "allocator_config" in v
    t = result["timing"]
    assert t["tokens_generated"] == 2 * 8 and t["tokens_generated_per_session"] == 8
    assert t["prefill_seconds"] > 0 and t["ms_per_output_token"] > 0 and len(t["step_seconds"]) == 2


def test_by_hand_run_prints_the_result_on_stdout(runs):
    result = ok(runs, "inf-dynamic-fp32")
    assert result["type"] == "result" and runs["inf-dynamic-fp32"]["messages"] == []


# --------------------------------------------------------------------------------------------
# inference
# --------------------------------------------------------------------------------------------


def kv_bytes(layout: str, B: int, Tin: int, N: int, elem: int, block: int = 4) -> int:
    """KV bytes held at the end of generation, from the shapes alone."""
    per_position = L * 2 * KV * HD * elem
    if layout == "contiguous":
        positions = Tin + N
    elif layout == "paged":
        positions = -(-(Tin + N) // block) * block
    else:  # dynamic: the last generated token is never fed back
        positions = Tin + N - 1
    return B * positions * per_position


@pytest.mark.parametrize(
    ("name", "layout", "elem"),
    [("inf-contiguous", "contiguous", 2), ("inf-dynamic-fp32", "dynamic", 4), ("inf-paged", "paged", 2)],
)
def test_inference_each_kv_layout(runs, name, layout, elem):
    result = ok(runs, name)
    weights = result["weights_bytes"]
    assert weights == expected_weight_bytes(RUNS[name])  # the engine's exact count, built independently
    kv = kv_bytes(layout, 2, 16, 8, elem)
    assert result["conditions"]["kv_cache_bytes"] == kv
    prompts = 2 * 16 * 8  # int64 ids
    # the peak holds at least the weights, the whole cache and the prompts at once ...
    assert peak(result) > weights
    assert peak(result) >= weights + kv + prompts
    # ... and the activations of a 2×16-token prefill of this model are small: a loose upper bound
    activations = 2 * 16 * (V + 8 * 128 + 16 * H) * 4 * 4
    assert peak(result) <= weights + 2 * kv + prompts + activations
    fw = result["framework"]
    assert fw["baseline_bytes"] == weights + result["conditions"]["buffers_bytes"] + prompts
    assert fw["unmatched_frees"] == 0
    assert len(fw["step_peaks"]) == 2 and max(fw["step_peaks"]) == peak(result)


def test_longer_output_or_more_sessions_never_lower_the_peak(runs):
    base = peak(ok(runs, "inf-contiguous"))
    longer = peak(ok(runs, "inf-longer-output"))
    wider = peak(ok(runs, "inf-more-sessions"))
    assert longer >= base and wider >= base
    # the cache alone grows by exactly this much
    assert longer - base >= kv_bytes("contiguous", 2, 16, 16, 2) - kv_bytes("contiguous", 2, 16, 8, 2)
    assert wider - base >= kv_bytes("contiguous", 4, 16, 8, 2) - kv_bytes("contiguous", 2, 16, 8, 2)


def test_bf16_quality_against_the_fp32_reference(runs):
    result = ok(runs, "inf-contiguous")
    q = result["quality"]
    assert q is not None and result["quality_reason"] is None
    assert q["reference"] == "fp32" and q["dtype"] == "bf16"
    assert q["top1_agreement"] >= 0.9
    assert 0 < q["max_rel_logit_error"] < 0.05
    assert q["positions"] == 2 * 16 and "max |a - b| / max |b|" in q["definition"]


def test_fp32_run_has_no_quality_comparison_with_a_reason(runs):
    result = ok(runs, "inf-dynamic-fp32")
    assert result["quality"] is None and "fp32" in result["quality_reason"]


# --------------------------------------------------------------------------------------------
# training
# --------------------------------------------------------------------------------------------


def test_training_adamw_holds_the_optimizer_state_at_steady_state(runs):
    result = ok(runs, "train-adamw")
    weights = result["weights_bytes"]
    assert weights == expected_weight_bytes(RUNS["train-adamw"])
    inputs = 2 * 2 * 64 * 8  # inputs + labels, int64
    # weights + exp_avg + exp_avg_sq (fp32, like the weights) + one fp32 step per tensor are live all along
    assert result["framework"]["baseline_bytes"] >= 3 * weights + inputs
    assert peak(result) > 3 * weights
    c = result["conditions"]
    assert (c["optimizer"], c["checkpointing"], c["sequence_length"], c["batch"]) == ("adamw", "none", 64, 2)
    assert all(math.isfinite(x) for x in result["losses"]) and len(result["losses"]) == 3
    assert result["timing"]["seconds_per_step"] > 0 and result["timing"]["tokens_per_step"] == 128
    assert result["quality"] is None and "fp32" in result["quality_reason"]


def test_sgd_holds_less_than_adamw_but_more_than_the_weights(runs):
    sgd, adamw = ok(runs, "train-sgd"), ok(runs, "train-adamw")
    assert sgd["weights_bytes"] < peak(sgd) < peak(adamw)
    assert peak(adamw) - peak(sgd) >= 2 * adamw["weights_bytes"]  # the two AdamW moments


def test_checkpointing_lowers_the_training_peak(runs):
    none = peak(ok(runs, "train-adamw"))
    full = peak(ok(runs, "train-adamw-full"))
    selective = peak(ok(runs, "train-adamw-selective"))
    assert full < selective <= none
    assert full < none


def test_bf16_training_quality_and_dtype(runs):
    result = ok(runs, "train-bf16-sgd")
    assert result["weights_bytes"] == expected_weight_bytes(RUNS["train-bf16-sgd"])
    assert result["weights_bytes"] * 2 == ok(runs, "train-sgd")["weights_bytes"]
    q = result["quality"]
    assert q["top1_agreement"] >= 0.9 and q["max_rel_logit_error"] < 0.05
    assert q["positions"] == 2 * 64


# --------------------------------------------------------------------------------------------
# out of memory, and what cannot run
# --------------------------------------------------------------------------------------------


def test_out_of_memory_is_a_result_with_exit_status_3(tmp_path):
    pytest.importorskip("torch")
    spec = huge_kv()
    # run alone, not beside the pool's threads: preexec_fn runs between fork and exec
    r = run_child(spec, tmp_path, cap_memory=True)
    assert r["rc"] == 3, r["stderr"][-3000:]
    result = r["result"]
    assert result["oom"] is True and result["phase"] == "prefill"
    assert "allocate" in result["oom_message"]
    assert result["weights_bytes"] == expected_weight_bytes(spec)
    assert result["framework"]["allocated_bytes_peak"] >= result["weights_bytes"]
    assert "up to the failure" in result["framework"]["method"]
    assert result["quality"] is None and result["quality_reason"]
    assert "Traceback" not in r["stderr"]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (training("lion"), "training.optimizer"),
        (training("adamw", weights="int8"), "precision.weights"),
        ({**training(), "workload": {**training()["workload"], "training": {"method": "lora"}}}, "training.method"),
        (
            {"workload": {"task": "training", "model": {"architecture": ARCH}, "parallelism": {"tensor": 2}}},
            "parallelism.tensor",
        ),
        (
            {
                "workload": {
                    "task": "custom",
                    "custom": {"components": [{"name": "x", "category": "weights", "bytes": 1}]},
                }
            },
            "needs a transformer model",
        ),
        ({**inference(), "warmup": 3}, "warmup"),
        (inference(measure_steps=0), "measure_steps"),
        (
            {
                **training(),
                "workload": {**training()["workload"], "precision": {"weights": "fp32", "master_weights": "fp32"}},
            },
            "precision.master_weights",
        ),
    ],
)
def test_unsupported_or_invalid_specs_name_the_field(tmp_path, spec, field):
    r = run_child(spec, tmp_path, pipe=True)
    assert r["rc"] == 2, r["stderr"][-2000:]
    assert field in r["stderr"] and r["stderr"].startswith("error:")
    assert r["messages"] == [] and "Traceback" not in r["stderr"]


def test_child_module_imports_without_torch():
    code = (
        "import sys, workers.runner, workers.runner.synthetic, workers.runner.cpu_memory; print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------------------------
# an independent measurement of the same run
# --------------------------------------------------------------------------------------------


class StorageTracker:
    """Live tensor storage bytes seen through a TorchDispatchMode (each op's outputs) and weakrefs (their
    frees): a different mechanism from the child's profiler replay. It cannot see buffers a kernel
    allocates and frees internally, so its peak is a lower bound of the allocator's."""

    def __init__(self, device: str) -> None:
        import torch
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves

        tracker = self
        self.live = 0
        self.window_peak = 0
        self.in_window = False
        self.records: dict[int, list] = {}

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                for t in tree_leaves(out):
                    if isinstance(t, torch.Tensor) and t.device.type != "meta":
                        tracker.see(t)
                return out

        self.mode = Mode()
        self.active = False

    def see(self, t: Any) -> None:
        storage = t.untyped_storage()
        key, size = id(storage), storage.nbytes()
        record = self.records.get(key)
        if record is None:

            def freed(_ref: Any, key: int = key) -> None:
                rec = self.records.pop(key, None)
                if rec is not None:
                    self.live -= rec[1]

            self.records[key] = [weakref.ref(storage, freed), size]
            self.live += size
        elif record[1] != size:  # resized in place
            self.live += size - record[1]
            record[1] = size
        if self.in_window:
            self.window_peak = max(self.window_peak, self.live)

    def start(self) -> None:
        self.mode.__enter__()
        self.active = True

    def begin_window(self) -> None:
        self.in_window = True
        self.window_peak = self.live

    def end_window(self) -> None:
        self.in_window = False

    def begin_step(self) -> None:
        pass

    def end_step(self) -> None:
        pass

    def stop(self) -> None:
        if self.active:
            self.active = False
            self.mode.__exit__(None, None, None)

    def framework(self, oom: bool = False) -> dict[str, Any]:
        return {"allocated_bytes_peak": self.window_peak, "method": "dispatch-mode storage tracker"}


@pytest.mark.parametrize(
    ("name", "slack"),
    [
        ("train-adamw", 0.005),  # fp32: the two agree to the byte on the machine this was written on
        ("inf-dynamic-fp32", 0.005),
        ("train-adamw-full", 0.01),  # recomputation inside backward: a few KB of kernel scratch
        ("inf-paged", 0.06),  # bf16 GEMMs on a CPU stage fp32 copies inside aten::mm (13 KB of 282 KB here)
    ],
)
def test_profiler_peak_agrees_with_an_independent_storage_tracker(runs, name, slack):
    torch = pytest.importorskip("torch")
    from workers.runner.synthetic import execute, load_plan

    child = ok(runs, name)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the child ran with one thread (kernel scratch buffers scale with threads)
    try:
        result, status = execute(load_plan({**RUNS[name], "quality": False}), tracker_factory=StorageTracker)
    finally:
        torch.set_num_threads(threads)
    assert status == 0
    tracked = peak(result)
    assert result["weights_bytes"] == child["weights_bytes"]
    # every storage the tracker sees is an allocator block with the same lifetime: the replay is never
    # below it, and above it only by buffers a kernel allocates and frees internally
    assert tracked <= peak(child) <= tracked * (1 + slack), (tracked, peak(child))


# --------------------------------------------------------------------------------------------
# the builder's other architectures (in process, through the storage tracker: no profiler, no import)
# --------------------------------------------------------------------------------------------


def _hf(model_type: str, **extra: Any) -> dict:
    base = {
        "model_type": model_type,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "vocab_size": 256,
        "max_position_embeddings": 128,
    }
    return {"hf_config": {**base, **extra}}


VARIANTS = {
    # routed experts, standard MLP, LayerNorm, tied head, biases, eager attention, momentum, full checkpointing
    "moe-eager-train": (
        "training",
        {
            "architecture": {
                **ARCH,
                "num_experts": 4,
                "experts_per_token": 2,
                "mlp": "standard",
                "norm": "layer",
                "tie_word_embeddings": True,
                "attention_bias": True,
            }
        },
        {"optimizer": "sgd_momentum", "activation_checkpointing": "full"},
        {"weights": "fp32"},
        "eager",
    ),
    "gpt2-learned-positions": (
        "inference",
        {
            "hf_config": {
                "model_type": "gpt2",
                "n_embd": 64,
                "n_layer": 2,
                "n_head": 4,
                "n_positions": 32,
                "vocab_size": 256,
            }
        },
        {"kv_cache_layout": "dynamic"},
        {"weights": "fp32"},
        "eager",
    ),
    "gemma2-softcap-four-norms-fp16": (
        "inference",
        _hf("gemma2", head_dim=16, sliding_window=8),
        {},
        {"weights": "fp16"},
        "eager",
    ),
    "qwen3-qk-norm-autocast": (
        "training",
        _hf("qwen3", head_dim=16),
        {"optimizer": "adamw", "activation_checkpointing": "selective"},
        {"weights": "fp32", "compute": "bf16"},
        "sdpa",
    ),
    "qwen2-moe-shared-dense": (
        "inference",
        _hf(
            "qwen2_moe",
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=64,
            mlp_only_layers=[0],
        ),
        {"kv_cache_layout": "paged"},
        {"weights": "fp32"},
        "sdpa",
    ),
    "gpt-neox-parallel-partial-rotary": (
        "training",
        {
            "hf_config": {
                "model_type": "gpt_neox",
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "intermediate_size": 128,
                "vocab_size": 256,
            }
        },
        {"optimizer": "sgd"},
        {"weights": "fp32"},
        "sdpa",
    ),
    "opt-projected-embeddings": (
        "inference",
        {
            "hf_config": {
                "model_type": "opt",
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "ffn_dim": 128,
                "vocab_size": 256,
                "max_position_embeddings": 64,
                "word_embed_proj_dim": 32,
            }
        },
        {"kv_cache_layout": "contiguous"},
        {"weights": "fp32"},
        "sdpa",
    ),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_other_architectures_build_and_run(name):
    torch = pytest.importorskip("torch")
    from workers.runner.synthetic import execute, load_plan

    task, model, section, precision, attention = VARIANTS[name]
    workload = {
        "task": task,
        "model": model,
        "precision": precision,
        "runtime": {"device": "cpu", "attention": attention},
    }
    if task == "inference":
        workload["inference"] = {
            "max_input_tokens": 12,
            "max_output_tokens": 4,
            "concurrent_sessions": 2,
            "engine": "generic",
            "kv_block_tokens": 4,
            **section,
        }
    else:
        workload["training"] = {"micro_batch_size": 2, "sequence_length": 16, **section}
    spec = {"workload": workload, "device": "cpu", "warmup_steps": 1, "measure_steps": 1}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result, status = execute(load_plan(spec), tracker_factory=StorageTracker)
    finally:
        torch.set_num_threads(threads)
    assert status == 0
    assert result["weights_bytes"] == expected_weight_bytes(spec)  # the engine's count for this architecture
    assert peak(result) > result["weights_bytes"]
    assert all(math.isfinite(x) for x in result.get("losses", [0.0]))
    if precision.get("compute", precision["weights"]) in ("bf16", "fp16"):
        assert result["quality"]["top1_agreement"] >= 0.9
    else:
        assert result["quality"] is None


def test_every_preset_builds_with_the_engines_parameter_count():
    """The builder on the meta device (no memory) against the engine's exact counts, one preset per family."""
    torch = pytest.importorskip("torch")
    from budgets.engine import load_presets
    from workers.runner.synthetic import _nn

    smallest: dict[str, Any] = {}
    for preset in load_presets().values():
        family = preset.spec.model_type
        if preset.spec.num_experts > 16:
            continue  # hundreds of expert modules: slow to construct, and mixtral covers routed experts
        if family not in smallest or preset.parameter_count < smallest[family].parameter_count:
            smallest[family] = preset
    assert len(smallest) >= 8
    for preset in smallest.values():
        with torch.device("meta"):
            model = _nn().Decoder(preset.spec, "sdpa", torch.bfloat16)
        assert sum(p.numel() for p in model.parameters()) == parameter_count(preset.spec).total, preset.id


def test_learned_position_table_bounds_the_request():
    from workers.runner.synthetic import SpecError, load_plan

    model, section = VARIANTS["gpt2-learned-positions"][1], {"max_input_tokens": 30, "max_output_tokens": 8}
    with pytest.raises(SpecError, match=r"inference.max_input_tokens \+ inference.max_output_tokens = 38 exceeds"):
        load_plan(
            {"workload": {"task": "inference", "model": model, "inference": section, "runtime": {"device": "cpu"}}}
        )


def test_a_node_without_torch_says_what_to_install(monkeypatch, tmp_path) -> None:
    """Issue 16, first hour, item 1: without torch the job failed in 3 s with a raw traceback."""
    import builtins

    from workers.runner import synthetic

    real_import = builtins.__import__

    def no_torch(name, *args, **kwargs):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError("No module named 'torch'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_torch)
    with pytest.raises(synthetic.SpecError, match=r"PyTorch is not installed on this node .*node extra"):
        synthetic.execute(synthetic.load_plan({**RUNS[next(iter(RUNS))], "quality": False}))
