"""The runner on a real GPU: the synthetic workload on CUDA under NVML sampling. Skipped elsewhere.

A green CPU run is no GPU acceptance: these run only where torch sees a CUDA device and NVML answers
(``pytest -m gpu`` on a node). They check the views' order, which holds on any GPU: PyTorch's
allocated peak ≤ its reserved peak ≤ what NVML saw the device use, and the weights inside all three.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from workers.runner.execute import RunOptions, run_measured
from workers.runner.plan import synthetic_argv

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

MODEL = {"architecture": {"num_layers": 4, "hidden_size": 1024, "num_attention_heads": 16,
                          "num_key_value_heads": 4, "intermediate_size": 2816, "vocab_size": 32000}}  # fmt: skip


@pytest.fixture(scope="module", autouse=True)
def _cuda() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device here")


def _run(tmp_path: Path, workload: dict[str, Any]) -> dict[str, Any]:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"workload": workload, "device": "cuda", "quality": True}))
    document = run_measured(RunOptions(argv=synthetic_argv(str(spec)), cwd=str(tmp_path), time_limit_s=600))
    assert document["outcome"] == "succeeded", document["error"]
    return document


def _views_in_order(document: dict[str, Any]) -> None:
    peaks = document["peaks"]
    weights = document["conditions"]["parameters"] * 2  # bf16
    assert weights <= peaks["framework_allocated_bytes"] <= peaks["framework_reserved_bytes"]
    assert peaks["framework_reserved_bytes"] <= document["sampling"]["device_used_peak_delta_bytes"] + 2**21
    assert document["sampling"]["device_samples"] > 10 and document["sampling"]["memory_info_version"] in (1, 2)
    assert {"cuda_init", "weights_loaded", "measured_end"} <= set(document["sampling"]["checkpoints"])
    # The device peak ends at measured_end: the fp32 quality reference built after it is not the workload's.
    assert peaks["device_used_bytes"] == max(document["sampling"]["checkpoint_peaks"]["measured_end"])
    assert document["versions"]["child_torch_cuda"]


def test_synthetic_inference_on_cuda_reads_every_view(tmp_path: Path) -> None:
    document = _run(tmp_path, {"task": "inference", "model": MODEL, "precision": {"weights": "bf16"},
                               "inference": {"max_input_tokens": 1024, "max_output_tokens": 64,
                                             "concurrent_sessions": 8, "engine": "generic"}})  # fmt: skip
    _views_in_order(document)
    assert document["quality"]["top1_agreement"] >= 0.9
    assert document["timing"]["ms_per_output_token"] > 0


def test_synthetic_training_on_cuda_reads_every_view(tmp_path: Path) -> None:
    document = _run(tmp_path, {"task": "training", "model": MODEL, "precision": {"weights": "bf16"},
                               "training": {"micro_batch_size": 4, "sequence_length": 512}})  # fmt: skip
    _views_in_order(document)
    assert document["framework"]["num_ooms"] == 0
