"""The measured run is the recommended run (issue 17): a serving program's acceptance job runs the launch the
recommender gives the ordered configuration, flag by flag, records it, and is compared with that plan's budget;
an SGLang run is judged, like a vLLM one, by what its own start-up report says the workload needs of its pool."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from budgets.services import workload_validate
from catalog.models import Node
from measurements import services
from measurements.models import AcceptanceJob, Order, RegisteredProgram
from recommendations.services import verdict_for
from workers.runner.plan import program_argv
from workers.runner.programs import sglang_serve, vllm_serve

from .helpers import measurement_document

REPO = Path(__file__).resolve().parents[2]
WORKLOADS = REPO / "fixtures" / "workloads"
RECORDS = REPO / "benchmarks" / "sglang_published" / "records.json"
GIB = 2**30

#: The programs' own options, which drive the load rather than set the engine.
WRAPPER_FLAGS = {"--max-input-tokens", "--max-output-tokens", "--concurrency"}
#: Flags a job passes that the launch leaves out, at the engine's own default.
ENGINE_DEFAULTS = {"vllm": {"--kv-cache-dtype": "auto"}, "sglang": {"--pp-size": "1"}}
PROGRAMS = {"vllm": ("vllm-serve", vllm_serve), "sglang": ("sglang-serve", sglang_serve)}

#: (example workload, a configuration its entry fits on): one server on one GPU (vLLM), tensor-parallel over two
#: (SGLang, whose workload names no parallelism: the plan's TP2 is the recommender's, not the workload's)
EXAMPLES = [("vllm-llama-3.1-8b-chat.json", "h100-sxm-80gb-x1-r550"),
            ("sglang-qwen3-30b-a3b-chat.json", "h100-sxm-80gb-x2-r550")]  # fmt: skip


def _pairs(tokens: list[str]) -> dict[str, str]:
    """``--flag value`` and ``--flag=value`` pairs, in order (a later one wins)."""
    pairs: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        if "=" in tokens[i]:
            flag, value = tokens[i].split("=", 1)
            i += 1
        else:
            flag, value = tokens[i], tokens[i + 1]
            i += 2
        pairs[flag] = value
    return pairs


def launch_flags(argv: list[str]) -> dict[str, str]:
    """A launch's engine flags; vLLM's positional model as ``--model`` (its program's option)."""
    first = next(i for i, a in enumerate(argv) if a.startswith("--"))
    flags = _pairs(argv[first:])
    if argv[0] == "vllm":
        flags["--model"] = argv[first - 1]
    return flags


def program_flags(argv: list[str]) -> dict[str, str]:
    """The engine flags a filled program command passes: its own options (the load's aside) and each
    ``--extra-arg=--flag=value``."""
    flags: dict[str, str] = {}
    tokens = argv[3:]
    i = 0
    while i < len(tokens):
        if tokens[i].startswith("--extra-arg="):
            flags.update(_pairs([tokens[i].removeprefix("--extra-arg=")]))
            i += 1
            continue
        if tokens[i] not in WRAPPER_FLAGS:
            flags[tokens[i]] = tokens[i + 1]
        i += 2
    return flags


def engine_flags(command: list[str]) -> dict[str, str]:
    """The flags the program hands the engine (its loopback host and port aside)."""
    flags = _pairs(command[3:])
    return {flag: value for flag, value in flags.items() if flag not in ("--host", "--port")}


def order_on(api, workload: dict[str, Any], slug: str) -> Order:
    posted = api.post("/api/v1/workloads/", workload, format="json")
    assert posted.status_code == 201, posted.json()
    order = api.post("/api/v1/orders/", {"workload": posted.json()["id"], "configuration": slug}, format="json")
    assert order.status_code == 201, order.json()
    return Order.objects.get(pk=order.json()["id"])


def started(order: Order, program_slug: str) -> tuple[AcceptanceJob, services.ClaimedJob, Node]:
    """A job of the shipped program on a live node of the order's configuration, started and claimed."""
    program = RegisteredProgram.objects.get(slug=program_slug)
    program.allowed_configurations.add(order.configuration)
    configuration = order.configuration
    node = Node.objects.create(name=f"node-{order.pk}", configuration=configuration,
                               device_count=configuration.device_count, last_heartbeat_at=timezone.now())  # fmt: skip
    job = services.acceptance_job_start(order, program=program)
    claimed = services.acceptance_job_claim(job.pk, node.name)
    assert claimed is not None, job.error
    job.refresh_from_db()
    return job, claimed, node


def example(name: str) -> dict[str, Any]:
    return json.loads((WORKLOADS / name).read_text())


@pytest.mark.parametrize(("name", "slug"), EXAMPLES)
def test_the_job_runs_the_recommended_launch_flag_by_flag(api, user, catalog, name: str, slug: str) -> None:
    order = order_on(api, example(name), slug)
    entry = verdict_for(workload_validate(order.workload.description), slug, user)
    assert entry is not None and entry.launch is not None, "the example fits here, with a launch"
    engine = entry.launch.engine
    program_slug, module = PROGRAMS[engine]
    job, claimed, _ = started(order, program_slug)

    argv = program_argv(claimed.argv_template, claimed.placeholders)
    launch, passed = launch_flags(list(entry.launch.argv)), program_flags(argv)
    assert {flag: passed.get(flag) for flag in launch} == launch  # every engine flag, at the launch's value
    extra = {flag: value for flag, value in passed.items() if flag not in launch}
    assert extra.items() <= ENGINE_DEFAULTS[engine].items()  # and nothing else but engine defaults

    # the program accepts the command, and hands the engine the launch's flags (its own adjustments named)
    args = module.parse_options(argv[3:])
    command = vllm_serve.vllm_command(args, 8000) if engine == "vllm" else sglang_serve.sglang_command(args, 8000)
    served = engine_flags(command)
    adjusted = dict(launch)
    if engine == "vllm" and launch["--pipeline-parallel-size"] == "1":
        assert "--pipeline-parallel-size" not in served  # the program leaves vLLM's default out
        del adjusted["--pipeline-parallel-size"]
    if engine == "sglang":  # SGLang serves the longest request in full only with 2 tokens of room
        adjusted["--context-length"] = str(sglang_serve.needed_context_length(args.max_input_tokens,
                                                                              args.max_output_tokens))  # fmt: skip
    assert {flag: served.get(flag) for flag in adjusted} == adjusted

    # the job records the launch it ran, and the plan's budget it is compared with
    record = job.launch
    assert record["launch"]["argv"] == list(entry.launch.argv) and record["launch"]["engine"] == engine
    assert (record["configuration"], record["verdict"]) == (slug, entry.verdict.value)
    assert record["not_in_template"] == []
    assert entry.budget is not None and record["budget"] == entry.budget.as_contract()
    assert entry.plan is not None and record["plan"]["tensor"] == entry.plan.tensor


def test_the_sglang_plan_is_the_recommenders_not_the_workloads(api, user, catalog) -> None:
    # the workload names no parallelism (tensor 1): the order's budget is one GPU's share of a TP1 server, the
    # recommended launch runs TP2, and the run is compared with the TP2 budget it ran
    order = order_on(api, example("sglang-qwen3-30b-a3b-chat.json"), "h100-sxm-80gb-x2-r550")
    job, claimed, _ = started(order, "sglang-serve")
    argv = program_argv(claimed.argv_template, claimed.placeholders)
    assert argv[argv.index("--tp-size") + 1] == "2"
    weights = job.launch["budget"]["per_device"]["components"]["weights"]["bytes"]
    assert weights < 0.6 * order.budget["per_device"]["components"]["weights"]["bytes"]


def test_a_program_that_takes_no_engine_setting_records_no_launch(api, catalog) -> None:
    order = order_on(api, example("vllm-llama-3.1-8b-chat.json"), "h100-sxm-80gb-x1-r550")
    program = RegisteredProgram.objects.create(slug="echo", name="echo", argv_template=["{python}", "-c", "pass"])
    program.allowed_configurations.add(order.configuration)
    job = services.acceptance_job_start(order, program=program)
    assert job.launch == {}
    assert services.acceptance_job_start(order).launch == {}  # the synthetic run: the workload itself


def test_without_a_launch_the_job_says_why_and_runs_the_workloads_settings(api, catalog) -> None:
    # 61 GB of Qwen3-30B-A3B weights on one 48 GB L40S: does not fit, so the recommender gives no command
    order = order_on(api, example("sglang-qwen3-30b-a3b-chat.json"), "l40s-x1-r550")
    job, claimed, _ = started(order, "sglang-serve")
    assert job.launch["verdict"] == "does_not_fit" and job.launch["launch"] is None
    assert "no serving launch" in job.launch["why"]
    args = sglang_serve.parse_options(program_argv(claimed.argv_template, claimed.placeholders)[3:])
    assert (args.tp_size, args.mem_fraction_static, args.extra_arg) == (1, None, [])  # the workload's; SGLang's


def test_an_sglang_job_is_judged_by_its_need_of_the_pool_like_with_like(api, catalog) -> None:
    order = order_on(api, example("sglang-qwen3-30b-a3b-chat.json"), "h100-sxm-80gb-x2-r550")
    job, claimed, node = started(order, "sglang-serve")
    budget = job.launch["budget"]
    serving, weights = budget["serving"], budget["per_device"]["components"]["weights"]["bytes"]
    pool_tokens = serving["kv_pool_tokens"]
    # SGLang's own report with the budget's figures: its need is the budget's serving.need_bytes, exactly
    report = {
        "engine": "sglang",
        "engine_report": {
            "weights_bytes": weights,
            "kv_cache_tokens": pool_tokens,
            "kv_cache_bytes": serving["kv_bytes_per_token"] * pool_tokens,
        },
    }
    document = measurement_document(program_report=report)
    measurement = services.acceptance_job_finish(job.pk, node.name, claimed.attempt, document)
    assert measurement is not None and measurement.budget == budget  # the plan it ran, not the order's TP1 budget
    ratio = measurement.ratios["sglang_need"]
    assert ratio["basis"] == "serving.need_bytes" and ratio["estimated_bytes"] == serving["need_bytes"]
    assert ratio["ratio"] == pytest.approx(1.0, abs=1e-4)
    assert "vllm_need" not in measurement.ratios
    order.refresh_from_db()
    assert order.decision["view"] == "sglang_need" and order.decision["measured_peak_bytes"] == ratio["measured_bytes"]
    assert order.decision["measured_peak_bytes"] < document["peaks"]["device_used_bytes"]  # not the preallocated pool


QWEN3_14B = {
    "name": "qwen3-14b-sglang",
    "model": {"preset": "qwen3-14b"},
    "precision": {"weights": "bf16"},
    "inference": {"engine": "sglang", "max_input_tokens": 4096, "max_output_tokens": 1024, "concurrent_sessions": 8},
}


def published_report(record_id: str) -> dict[str, Any]:
    """A published SGLang start-up (benchmarks/sglang_published), as the SGLang program reports it."""
    from workers.runner.sglang_log import parse_sglang_memory_report

    quote = next(r for r in json.loads(RECORDS.read_text())["records"] if r["id"] == record_id)["quote"]
    report = parse_sglang_memory_report("\n".join(quote if isinstance(quote, list) else quote.split(" | ")))
    return {"engine": "sglang", "engine_report": report.as_dict()}


def test_a_published_sglang_start_up_measures_its_need_against_the_budgets(api, catalog) -> None:
    # Qwen3-14B on one ~48 GB GPU (xorbitsai/inference#3481): 27.57 GiB of weights, 91,749 tokens in 14.00 GiB of
    # KV; 8 sessions of 5,120 tokens need 27.57 GiB + 40,960 × 163,840 B, against the L40S budget's need
    order = order_on(api, QWEN3_14B, "l40s-x1-r550")
    job, claimed, node = started(order, "sglang-serve")
    assert job.launch["verdict"] == "fits"
    report = published_report("xinference3481-qwen3-14b-1gpu")
    document = measurement_document(program_report=report, peaks={"device_used_bytes": 44 * GIB, "reasons": {}})
    measurement = services.acceptance_job_finish(job.pk, node.name, claimed.attempt, document)
    assert measurement is not None
    ratio = measurement.ratios["sglang_need"]
    per_token = round(14.00 * GIB) / 91_749
    assert ratio["measured_bytes"] == int(round(27.57 * GIB) + 8 * 5120 * per_token)
    assert 0.99 < ratio["ratio"] < 1.01  # the budget's weights and cell are SGLang's, within 0.2 %
    assert measurement.ratios["device_used"]["ratio"] > 1.0  # the device view: the whole static share and more


def test_a_report_without_weights_says_so_and_the_device_view_decides(api, catalog) -> None:
    order = order_on(api, QWEN3_14B, "l40s-x1-r550")
    job, claimed, node = started(order, "sglang-serve")
    pool_only = {"engine": "sglang", "engine_report": {"kv_cache_bytes": 14 * GIB, "kv_cache_tokens": 91_749}}
    document = measurement_document(program_report=pool_only)
    measurement = services.acceptance_job_finish(job.pk, node.name, claimed.attempt, document)
    assert measurement is not None and "sglang_need" not in measurement.ratios
    order.refresh_from_db()
    assert order.decision["view"] == "device_used"
    assert order.decision["sglang_need_unavailable"].startswith("SGLang's start-up report lacks weights_bytes")


def test_an_upload_is_compared_with_the_orders_budget(api, catalog) -> None:
    order = order_on(api, QWEN3_14B, "l40s-x1-r550")
    report = published_report("xinference3481-qwen3-14b-1gpu")
    measurement, _ = services.measurement_record(order, measurement_document(devices=[], program_report=report),
                                                 source="upload")  # fmt: skip
    assert measurement.budget == order.budget
    assert measurement.ratios["sglang_need"]["estimated_bytes"] == order.budget["serving"]["need_bytes"]


def test_the_runner_records_the_engines_versions() -> None:
    from workers.runner.execute import KEY_PACKAGES

    assert {"vllm", "sglang"} <= set(KEY_PACKAGES)


def test_the_migration_gives_the_shipped_programs_every_launch_flag_and_leaves_staffs_own(db) -> None:
    from importlib import import_module

    from django.apps import apps

    from workers.runner.programs import SGLANG_SERVE_TEMPLATE, VLLM_SERVE_TEMPLATE

    migration = import_module("measurements.migrations.0006_acceptancejob_launch")
    shipped = {"vllm-serve": list(VLLM_SERVE_TEMPLATE), "sglang-serve": list(SGLANG_SERVE_TEMPLATE)}
    assert {slug: p.argv_template for slug, p in RegisteredProgram.objects.in_bulk(list(shipped), field_name="slug")
            .items()} == shipped  # fmt: skip
    RegisteredProgram.objects.filter(slug="vllm-serve").update(argv_template=migration.VLLM_BEFORE)
    RegisteredProgram.objects.filter(slug="sglang-serve").update(argv_template=["{python}", "staffs-own"])
    migration.forward(apps, None)
    assert RegisteredProgram.objects.get(slug="vllm-serve").argv_template == shipped["vllm-serve"]
    assert RegisteredProgram.objects.get(slug="sglang-serve").argv_template == ["{python}", "staffs-own"]
    assert "recommendation" in RegisteredProgram.objects.get(slug="vllm-serve").description
    migration.backward(apps, None)
    assert RegisteredProgram.objects.get(slug="vllm-serve").argv_template == migration.VLLM_BEFORE
