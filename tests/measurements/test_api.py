"""Orders, jobs, uploads and programs through the API: ownership, bad input, idempotent uploads, decisions."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from catalog.models import Node
from measurements.models import AcceptanceJob, Measurement, Order, RegisteredProgram

from .helpers import TINY_CPU_WORKLOAD, cpu_configuration, measurement_document

pytestmark = pytest.mark.django_db


@pytest.fixture
def configuration():
    return cpu_configuration()


@pytest.fixture
def order(api, configuration) -> dict:
    workload = api.post("/api/v1/workloads/", TINY_CPU_WORKLOAD, format="json")
    assert workload.status_code == 201, workload.json()
    response = api.post("/api/v1/orders/", {"workload": workload.json()["id"], "configuration": configuration.slug},
                        format="json")  # fmt: skip
    assert response.status_code == 201, response.json()
    return response.json()


def test_an_order_keeps_its_budget_and_criteria_and_starts_as_a_draft(order) -> None:
    assert order["status"] == "draft"
    assert order["budget_peak_bytes"] == order["budget"]["per_device"]["total"]["bytes"] > 0
    assert order["acceptance"] == {"min_headroom_fraction": 0.10, "max_ms_per_output_token": None}


def test_another_users_order_is_a_404_and_their_workload_cannot_be_ordered(order, other_api, configuration) -> None:
    assert other_api.get(f"/api/v1/orders/{order['id']}/").status_code == 404
    assert other_api.post(f"/api/v1/orders/{order['id']}/acceptance-jobs/", {}, format="json").status_code == 404
    response = other_api.post("/api/v1/orders/", {"workload": order["workload"], "configuration": configuration.slug},
                              format="json")  # fmt: skip
    assert response.status_code == 400 and "workload" in response.json()


def test_bad_order_input_names_the_field(api, order) -> None:
    response = api.post("/api/v1/orders/", {"workload": order["workload"], "configuration": "no-such"}, format="json")
    assert response.status_code == 400 and "configuration" in response.json()
    response = api.post(f"/api/v1/orders/{order['id']}/acceptance-jobs/", {"program": "nope"}, format="json")
    assert response.status_code == 400 and "program" in response.json()


def test_a_configuration_without_a_live_node_fails_fast_with_no_node(api, order) -> None:
    Node.objects.create(name="old", configuration_id=Order.objects.get().configuration_id,
                        last_heartbeat_at=timezone.now() - timedelta(hours=1))  # fmt: skip
    response = api.post(f"/api/v1/orders/{order['id']}/acceptance-jobs/", {}, format="json")
    assert response.status_code == 409
    job = response.json()
    assert (job["status"], job["failure_kind"]) == ("failed", "no_node")
    assert "cpu-test" in job["error"]
    assert Order.objects.get().status == "draft"


def test_a_job_goes_to_a_free_live_node_and_waits_while_that_node_is_busy(api, order, configuration) -> None:
    node = Node.objects.create(name="n1", configuration=configuration, last_heartbeat_at=timezone.now())
    first = api.post(f"/api/v1/orders/{order['id']}/acceptance-jobs/", {}, format="json")
    second = api.post(f"/api/v1/orders/{order['id']}/acceptance-jobs/", {}, format="json")
    assert first.status_code == second.status_code == 202
    assert first.json()["node"] == node.name and first.json()["status"] == "queued"
    assert second.json()["node"] is None  # one job per node: the second waits for it
    assert Order.objects.get().status == "acceptance_pending"
    cancelled = api.post(f"/api/v1/acceptance-jobs/{second.json()['id']}/cancel/")
    assert cancelled.status_code == 202 and cancelled.json()["status"] == "cancelled"
    again = api.post(f"/api/v1/acceptance-jobs/{second.json()['id']}/cancel/")
    assert again.status_code == 409


def test_an_upload_with_the_order_token_decides_the_order_and_a_repeat_stores_nothing(api, anon_api, order) -> None:
    token = api.post(f"/api/v1/orders/{order['id']}/upload-token/").json()["token"]
    peaks = {"framework_allocated_bytes": 2 * 2**30, "host_rss_bytes": 3 * 2**30,
             "reasons": {"device_used_bytes": "no NVML"}}  # fmt: skip
    document = measurement_document(devices=[], peaks=peaks)
    url = f"/api/v1/orders/{order['id']}/measurements/"
    first = anon_api.post(url, document, format="json", HTTP_AUTHORIZATION=f"Upload {token}")
    second = anon_api.post(url, document, format="json", HTTP_AUTHORIZATION=f"Upload {token}")
    assert first.status_code == 201, first.json()
    assert second.status_code == 200 and second.json()["id"] == first.json()["id"]
    assert Measurement.objects.count() == 1
    ratios = first.json()["ratios"]
    assert ratios["framework_allocated"]["estimated_bytes"] == order["budget_peak_bytes"]
    decided = api.get(f"/api/v1/orders/{order['id']}/").json()
    assert decided["status"] == "accepted"  # 3 GiB of a 24 GiB CPU configuration
    assert decided["decision"]["view"] == "host_rss"  # no GPU: the process tree's RSS is what must fit in RAM
    assert decided["decision"]["measured_peak_bytes"] == 3 * 2**30
    assert decided["decision"]["sentence"].startswith("Accepted")


def test_uploads_need_the_right_token_and_a_valid_document(api, anon_api, other_api, order) -> None:
    url = f"/api/v1/orders/{order['id']}/measurements/"
    assert anon_api.post(url, measurement_document(), format="json").status_code == 401
    assert (
        anon_api.post(url, measurement_document(), format="json", HTTP_AUTHORIZATION="Upload vpu_1_x").status_code
        == 401
    )
    assert other_api.post(url, measurement_document(), format="json").status_code == 404
    bad = api.post(url, measurement_document(outcome="great", duration_seconds=-1), format="json")
    assert bad.status_code == 400
    assert set(bad.json()) >= {"outcome", "duration_seconds"}
    huge = measurement_document()
    huge["peaks"]["device_used_bytes"] = 2**70
    assert "peaks.device_used_bytes" in api.post(url, huge, format="json").json()


def test_a_confirmed_order_is_final(api, order) -> None:
    api.post(f"/api/v1/orders/{order['id']}/measurements/", measurement_document(devices=[],
        peaks={"framework_allocated_bytes": 2**30, "reasons": {}}), format="json")  # fmt: skip
    assert api.post(f"/api/v1/orders/{order['id']}/confirm/").json()["status"] == "confirmed"
    assert api.post(f"/api/v1/orders/{order['id']}/cancel/").status_code == 409
    assert api.post(f"/api/v1/orders/{order['id']}/acceptance-jobs/", {}, format="json").status_code == 409
    assert api.delete(f"/api/v1/orders/{order['id']}/").status_code == 409


def _grant(user, *codenames: str) -> None:
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="measurements", codename__in=codenames)
    )


def test_programs_are_registered_by_staff_with_known_placeholders_only(api, staff_api, staff_user,
                                                                       configuration) -> None:  # fmt: skip
    _grant(staff_user, "add_registeredprogram")
    body = {"slug": "echo", "name": "Echo", "argv_template": ["{python}", "-c", "print('{max_model_len}')"],
            "allowed_configurations": [configuration.slug]}  # fmt: skip
    assert api.post("/api/v1/programs/", body, format="json").status_code == 403
    bad = staff_api.post("/api/v1/programs/", {**body, "argv_template": ["sh", "-c", "{cmd}"]}, format="json")
    assert bad.status_code == 400 and "allowed placeholders" in bad.json()["argv_template"][0]
    created = staff_api.post("/api/v1/programs/", body, format="json")
    assert created.status_code == 201, created.json()
    assert api.get("/api/v1/programs/echo/").json()["argv_template"][0] == "{python}"


def test_program_writes_need_the_model_permission_not_only_staff(staff_api, staff_user, configuration) -> None:
    # issue 16, finding 5: a staff account with no permission registered ["/bin/sh", "-c", "id; env"]
    body = {"slug": "sh", "name": "Shell", "argv_template": ["/bin/sh", "-c", "id; env"]}
    refused = staff_api.post("/api/v1/programs/", body, format="json")
    assert refused.status_code == 403 and "add/change/delete permission" in refused.json()["detail"]
    assert not RegisteredProgram.objects.filter(slug="sh").exists()
    assert staff_api.get("/api/v1/programs/").status_code == 200  # reading needs none

    _grant(staff_user, "add_registeredprogram")
    assert staff_api.post("/api/v1/programs/", body, format="json").status_code == 201
    assert staff_api.patch("/api/v1/programs/sh/", {"name": "x"}, format="json").status_code == 403
    assert staff_api.delete("/api/v1/programs/sh/").status_code == 403
    _grant(staff_user, "change_registeredprogram", "delete_registeredprogram")
    assert staff_api.patch("/api/v1/programs/sh/", {"name": "x"}, format="json").status_code == 200
    assert staff_api.delete("/api/v1/programs/sh/").status_code == 204


def test_a_program_not_allowed_on_the_configuration_is_refused(api, order, configuration) -> None:
    RegisteredProgram.objects.create(slug="elsewhere", name="x", argv_template=["true"])
    Node.objects.create(name="n1", configuration=configuration, last_heartbeat_at=timezone.now())
    response = api.post(f"/api/v1/orders/{order['id']}/acceptance-jobs/", {"program": "elsewhere"}, format="json")
    assert response.status_code == 400 and "not allowed on configuration" in response.json()["program"][0]
    assert not AcceptanceJob.objects.exists()


def test_the_shipped_vllm_program_fills_in_from_a_vllm_workload(api) -> None:
    from workers.runner.plan import placeholder_values, program_argv

    program = RegisteredProgram.objects.get(slug="vllm-serve")  # data migration 0002
    description = {"model": {"preset": "llama-3.1-8b"}, "inference": {"max_input_tokens": 6144,
                   "max_output_tokens": 2048, "concurrent_sessions": 32, "engine": "vllm"}}  # fmt: skip
    argv = program_argv(program.argv_template, placeholder_values(description, device_count=1))
    assert argv[argv.index("--max-model-len") + 1] == "8192"
    assert argv[argv.index("--max-num-seqs") + 1] == "32"
    assert argv[argv.index("--model") + 1] == "meta-llama/Llama-3.1-8B"
    assert argv[argv.index("--dtype") + 1] == "bfloat16"


def test_a_later_run_that_decides_nothing_keeps_the_earlier_verdict(api, order) -> None:
    url = f"/api/v1/orders/{order['id']}/measurements/"
    accepted = measurement_document(devices=[], peaks={"host_rss_bytes": 2**30, "reasons": {}})
    api.post(url, accepted, format="json")
    api.post(url, measurement_document(devices=[], outcome="failed", exit_code=1, peaks={"reasons": {}}), format="json")
    decided = api.get(f"/api/v1/orders/{order['id']}/").json()
    assert decided["status"] == "accepted"
    assert decided["decision"]["sentence"].startswith("Accepted")
    assert Measurement.objects.count() == 2


def test_a_negative_latency_is_a_400(api, order) -> None:
    bad = measurement_document(timing={"ms_per_output_token": -1})
    response = api.post(f"/api/v1/orders/{order['id']}/measurements/", bad, format="json")
    assert response.status_code == 400 and "timing.ms_per_output_token" in response.json()


def test_deleting_an_order_deletes_its_jobs_measurements_and_timelines(api, order, configuration) -> None:
    Node.objects.create(name="n1", configuration=configuration, last_heartbeat_at=timezone.now())
    api.post(f"/api/v1/orders/{order['id']}/acceptance-jobs/", {}, format="json")
    api.post(f"/api/v1/orders/{order['id']}/measurements/", measurement_document(devices=[]), format="json")
    assert Order.objects.get().decided_by is not None
    assert api.delete(f"/api/v1/orders/{order['id']}/").status_code == 204
    assert not Order.objects.exists() and not Measurement.objects.exists() and not AcceptanceJob.objects.exists()


def test_a_refused_upload_token_says_what_kind_of_credential_it_was(api, anon_api, order, user) -> None:
    """Issue 16, first hour, item 8: an API token sent as an upload token says it is the wrong kind; a token of
    another order says whose it is. Said from the token's shape alone: no lookup of API tokens (no oracle)."""
    from rest_framework.authtoken.models import Token

    url = f"/api/v1/orders/{order['id']}/measurements/"
    api_key = Token.objects.get_or_create(user=user)[0].key
    wrong_kind = anon_api.post(url, measurement_document(), format="json", HTTP_AUTHORIZATION=f"Upload {api_key}")
    assert wrong_kind.status_code == 401
    assert "not an upload token" in wrong_kind.json()["detail"]
    assert "Authorization: Token <key>" in wrong_kind.json()["detail"]
    other_order = order["id"] + 1000
    other = f"vpu_{other_order}_secret"
    elsewhere = anon_api.post(url, measurement_document(), format="json", HTTP_AUTHORIZATION=f"Upload {other}")
    assert elsewhere.json()["detail"] == f"This upload token is for order {other_order}, not order {order['id']}."
    stale = anon_api.post(url, measurement_document(), format="json", HTTP_AUTHORIZATION=f"Upload vpu_{order['id']}_x")
    assert "not valid for this order" in stale.json()["detail"]


def test_an_upload_from_other_hardware_is_kept_as_evidence_without_deciding(api, order) -> None:
    """Issue 16, 'orders decide on the right run': an upload measured on hardware that is not the ordered
    configuration's (here a GPU box for a CPU-only configuration) is attached but decides nothing."""
    url = f"/api/v1/orders/{order['id']}/measurements/"
    elsewhere = api.post(url, measurement_document(peaks={"host_rss_bytes": 2**30, "reasons": {}}), format="json")
    assert elsewhere.status_code == 201
    undecided = api.get(f"/api/v1/orders/{order['id']}/").json()
    assert undecided["status"] == "draft"
    assert undecided["decision"]["verdict"] == "undecided"
    assert (
        "Not decided by this upload: it measured 1 GPU(s); the order is for a CPU configuration"
        in (undecided["decision"]["sentence"])
    )
    same = api.post(url, measurement_document(devices=[], peaks={"host_rss_bytes": 2**30, "reasons": {}}),
                    format="json")  # fmt: skip
    assert same.status_code == 201
    assert api.get(f"/api/v1/orders/{order['id']}/").json()["status"] == "accepted"


def test_an_upload_without_a_gpu_is_judged_against_the_ram_of_the_machine_it_ran_on(api, anon_api, order) -> None:
    token = api.post(f"/api/v1/orders/{order['id']}/upload-token/").json()["token"]
    url = f"/api/v1/orders/{order['id']}/measurements/"
    peaks = {"host_rss_bytes": 3 * 2**30, "reasons": {}}
    # 3 GiB of RSS on a machine with 2 GiB of RAM did not fit there, whatever the catalog says of the configuration
    small = measurement_document(devices=[], peaks=peaks, conditions={"host_ram_bytes": 2 * 2**30})
    response = anon_api.post(url, small, format="json", HTTP_AUTHORIZATION=f"Upload {token}")
    assert response.status_code == 201, response.json()
    decided = api.get(f"/api/v1/orders/{order['id']}/").json()
    assert decided["status"] == "rejected" and decided["decision"]["usable_memory_bytes"] == 2 * 2**30
    # a run that reports no RAM is judged against the configuration's figure, as before
    unknown = measurement_document(devices=[], peaks=peaks)
    anon_api.post(url, unknown, format="json", HTTP_AUTHORIZATION=f"Upload {token}")
    decided = api.get(f"/api/v1/orders/{order['id']}/").json()
    assert decided["status"] == "accepted" and decided["decision"]["usable_memory_bytes"] > 3 * 2**30
