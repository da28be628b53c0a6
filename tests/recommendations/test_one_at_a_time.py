"""Expensive requests one at a time per account (issue 16, finding 9): one user's training recommendations (2-7 s
each, inside the 60/minute rate) held every worker of three, and others' GET /workloads/ took over 20 s. A rate counts
requests, not the seconds each one holds a worker, so a recommendation also takes its account's one slot in the shared
cache for as long as it runs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.recommendations.measured import QWEN_7B
from vramplan.throttling import one_at_a_time

pytestmark = pytest.mark.django_db


def _recommend(client, body=QWEN_7B):
    return client.post("/api/v1/recommend?top=3", body, format="json")


def test_a_second_recommendation_of_the_same_account_waits_for_the_first(api, other_api, user, catalog) -> None:
    running = SimpleNamespace(user=user, META={"REMOTE_ADDR": "127.0.0.1"})
    with one_at_a_time(running, "recommendation"):  # the account's first recommendation, still running
        busy = _recommend(api)
        assert busy.status_code == 429
        assert "still running" in busy.json()["detail"] and busy.headers["Retry-After"] == "1"
        assert _recommend(other_api).status_code == 200  # another account is not held up
        assert api.get("/api/v1/workloads/").status_code == 200  # nor are the account's cheap requests
    assert _recommend(api).status_code == 200  # the slot is free again once the first has answered


def test_the_slot_is_freed_whatever_the_answer(user) -> None:
    request = SimpleNamespace(user=user, META={"REMOTE_ADDR": "127.0.0.1"})
    with pytest.raises(RuntimeError), one_at_a_time(request, "recommendation"):
        raise RuntimeError("the recommendation failed")
    with one_at_a_time(request, "recommendation"):  # taken again: the failed one gave it back
        pass


def test_the_slots_per_account_are_a_setting(api, user, settings, catalog) -> None:
    settings.VRAMPLAN_RECOMMENDATIONS_PER_ACCOUNT = 2
    running = SimpleNamespace(user=user, META={"REMOTE_ADDR": "127.0.0.1"})
    with one_at_a_time(running, "recommendation"):
        assert _recommend(api).status_code == 200  # the second slot
        with one_at_a_time(running, "recommendation"):
            third = _recommend(api)
            assert (
                third.status_code == 429
                and "2 other recommendations of yours are still running" in third.json()["detail"]
            )
