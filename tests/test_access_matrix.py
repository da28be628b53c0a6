"""Who may do what, over every endpoint and every role.

The endpoints are not listed by hand: ``ENDPOINTS`` walks Django's URL resolver (every pattern under
``api/`` and ``api-auth/``, format-suffix variants included) and takes each pattern's methods from its
view (a viewset's action map, an APIView's handlers). Every (view, action) must have a rule in ``RULES``,
so an endpoint added without one fails ``test_every_endpoint_has_a_rule``.

Roles: anonymous; ``alice``, who owns the workloads, order, job and measurement the URLs point at; ``bob``,
another user; ``staff`` with the catalog's and registered programs' model permissions (as the admin
requires); ``bare_staff``, staff without them. The rules:

- anonymous → 401, except the session sign-in pages (``api-auth/``), which are public by design; the schema
  and docs need a signed-in user (``SPECTACULAR_SETTINGS["SERVE_PERMISSIONS"]``);
- another user's workload, order, job or measurement → 404 for every method, and never in bob's lists;
- non-staff writes to the catalog, nodes or registered programs → 403, and so are bare staff's: each needs
  the model permission too;
- staff → allowed: the answer the action gives an owner (2xx, or 400 for the empty body every write sends).

Each role's request runs in a savepoint rolled back afterwards, so every role meets the same rows.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import transaction
from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.utils import timezone
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from budgets import services as budget_services
from budgets.engine import load_presets
from catalog.models import Node
from measurements import services
from measurements.choices import MeasurementSource
from measurements.document import MeasurementDocument
from measurements.models import RegisteredProgram
from tests.factories import AcceleratorFactory, ArchitectureFactory, ConfigurationFactory, NodeFactory
from tests.measurements.helpers import TINY_CPU_WORKLOAD, cpu_configuration, measurement_document

WRITES = {"POST", "PUT", "PATCH", "DELETE"}
ROLES = ("anonymous", "alice", "bob", "staff", "bare_staff")


# --- the endpoints, from the URL resolver -------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    route: str  # the full pattern, as ResolverMatch.route spells it
    view: str  # the view class's name
    action: str  # the viewset action, or the HTTP method (lower case) of a plain view
    method: str

    @property
    def key(self) -> tuple[str, str]:
        return self.view, self.action

    def __str__(self) -> str:
        return f"{self.method} {self.route}"


def _walk(patterns: list[Any], prefix: str = "") -> list[tuple[str, Any]]:
    found = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            found += _walk(pattern.url_patterns, prefix + str(pattern.pattern).removeprefix("^"))
        elif isinstance(pattern, URLPattern):  # ResolverMatch.route joins the segments without their ^
            found.append((prefix + str(pattern.pattern).removeprefix("^"), pattern.callback))
    return found


def _methods(callback: Any) -> dict[str, str]:
    """HTTP method → action for a viewset, → method name for any other class-based view."""
    if getattr(callback, "actions", None):
        return {method.upper(): action for method, action in callback.actions.items()}
    view = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
    assert view is not None, f"{callback} is not a class-based view: give it a rule by hand"
    skip = {"options", "head"}
    return {m.upper(): m for m in view.http_method_names if m not in skip and hasattr(view, m)}


def _endpoints() -> list[Endpoint]:
    endpoints = []
    for route, callback in _walk(get_resolver().url_patterns):
        if not route.startswith(("api/", "api-auth/")):
            continue  # the admin has its own login and permission checks (tests/test_admin_smoke.py)
        view = getattr(callback, "cls", None) or getattr(callback, "view_class", None)
        for method, action in sorted(_methods(callback).items()):
            endpoints.append(Endpoint(route, view.__name__, action, method))
    return endpoints


ENDPOINTS = _endpoints()


def test_the_resolver_walk_finds_the_api() -> None:
    """A guard on the walk itself: every app's endpoints are there, format suffixes included."""
    views = {e.view for e in ENDPOINTS}
    for view in ("ArchitectureViewSet", "NodeViewSet", "EstimateView", "WorkloadViewSet", "OrderViewSet",
                 "AcceptanceJobViewSet", "MeasurementViewSet", "RegisteredProgramViewSet", "RecommendView",
                 "WorkloadRecommendationsView", "SpectacularAPIView", "LoginView"):  # fmt: skip
        assert view in views, view
    assert any(".(?P<format>" in e.route for e in ENDPOINTS)
    assert len(ENDPOINTS) > 80


# --- the rules ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """What each role gets. ``kind``: public (no sign-in), open (any signed-in user), owned (alice's row:
    others 404) or catalog (reads for everyone, writes for staff holding the model permission: the catalog, nodes
    and registered programs). ``ok``: the owner's (and staff's) status for the request."""

    kind: str
    ok: int
    listing: str | None = None  # a list of alice's rows: bob's page must not show them


CATALOG_VIEWS = ("ArchitectureViewSet", "AcceleratorViewSet", "ConfigurationViewSet", "NodeViewSet")
CATALOG = {"list": 200, "retrieve": 200, "create": 400, "update": 400, "partial_update": 200, "destroy": 204}
RULES: dict[tuple[str, str], Rule] = {
    **{(view, action): Rule("catalog", code) for view in CATALOG_VIEWS for action, code in CATALOG.items()},
    **{("RegisteredProgramViewSet", action): Rule("catalog", code) for action, code in CATALOG.items()},
    ("APIRootView", "get"): Rule("open", 200),
    ("EstimateView", "post"): Rule("open", 400),
    ("RecommendView", "post"): Rule("open", 400),
    ("ModelPresetViewSet", "list"): Rule("open", 200),
    ("ModelPresetViewSet", "retrieve"): Rule("open", 200),
    ("WorkloadViewSet", "list"): Rule("open", 200, listing="workload"),
    ("WorkloadViewSet", "create"): Rule("open", 400),
    ("WorkloadViewSet", "retrieve"): Rule("owned", 200),
    ("WorkloadViewSet", "destroy"): Rule("owned", 204),
    ("WorkloadViewSet", "budget"): Rule("owned", 200),
    ("WorkloadRecommendationsView", "get"): Rule("owned", 200),
    ("OrderViewSet", "list"): Rule("open", 200, listing="order"),
    ("OrderViewSet", "create"): Rule("open", 400),
    ("OrderViewSet", "retrieve"): Rule("owned", 200),
    ("OrderViewSet", "destroy"): Rule("owned", 204),
    ("OrderViewSet", "confirm"): Rule("owned", 200),  # the upload accepted it
    ("OrderViewSet", "cancel"): Rule("owned", 200),
    ("OrderViewSet", "upload_token"): Rule("owned", 201),
    ("OrderViewSet", "acceptance_jobs"): Rule("owned", 200),  # GET; POST below
    ("OrderViewSet", "measurements"): Rule("owned", 200),  # GET; POST below
    ("AcceptanceJobViewSet", "list"): Rule("open", 200, listing="job"),
    ("AcceptanceJobViewSet", "retrieve"): Rule("owned", 200),
    ("AcceptanceJobViewSet", "cancel"): Rule("owned", 202),
    ("MeasurementViewSet", "list"): Rule("open", 200, listing="measurement"),
    ("MeasurementViewSet", "retrieve"): Rule("owned", 200),
    ("SpectacularAPIView", "get"): Rule("open", 200),
    ("SpectacularSwaggerView", "get"): Rule("open", 200),
    ("SpectacularRedocView", "get"): Rule("open", 200),
    ("LoginView", "get"): Rule("public", 200),
    ("LoginView", "post"): Rule("public", 200),  # the form again, with its errors
    ("LoginView", "put"): Rule("public", 200),  # Django's FormView takes PUT as POST
    ("LogoutView", "post"): Rule("public", 200),
}
# The same action answers differently by method: (view, action, method) → rule.
BY_METHOD = {
    ("OrderViewSet", "acceptance_jobs", "POST"): Rule("owned", 202),  # queued on the live node
    ("OrderViewSet", "measurements", "POST"): Rule("owned", 400),  # an empty document
}


def rule_for(endpoint: Endpoint) -> Rule:
    return BY_METHOD.get((*endpoint.key, endpoint.method)) or RULES[endpoint.key]


def test_every_endpoint_has_a_rule() -> None:
    missing = sorted({f"{e.view}.{e.action}" for e in ENDPOINTS if e.key not in RULES})
    assert not missing, f"endpoints without an access rule: {missing}"
    assert not set(RULES) - {e.key for e in ENDPOINTS}, "rules for endpoints that no longer exist"


def expected(rule: Rule, role: str, method: str) -> int:
    if rule.kind == "public":
        return rule.ok
    if role == "anonymous":
        return 401
    write = method in WRITES
    if rule.kind == "catalog" and write:
        return rule.ok if role == "staff" else 403
    if rule.kind == "catalog":
        return rule.ok
    if rule.kind == "owned" and role == "bob":
        return 404
    return rule.ok


# --- the world every request meets --------------------------------------------------------------------------


@dataclass
class World:
    clients: dict[str, APIClient]
    ids: dict[str, Any]  # what each URL keyword means for each view
    alice_rows: dict[str, int]  # kind → id of alice's row in the lists


def _client(user: Any | None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


@pytest.fixture
def world(db) -> World:
    users = get_user_model().objects
    alice, bob = users.create(username="alice"), users.create(username="bob")
    staff, bare_staff = users.create(username="staff", is_staff=True), users.create(username="bare", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(content_type__app_label="catalog")
                               | Permission.objects.filter(content_type__model="registeredprogram"))  # fmt: skip

    # Catalog rows nothing refers to (the detail URLs of the catalog, deletable), and an order's chain.
    architecture, accelerator, configuration = ArchitectureFactory(), AcceleratorFactory(), ConfigurationFactory()
    node = NodeFactory()
    cpu = cpu_configuration()
    Node.objects.create(name="live", configuration=cpu, last_heartbeat_at=timezone.now())
    program = RegisteredProgram.objects.create(slug="prog", name="Program", argv_template=["python3", "-c", "pass"])
    workload = budget_services.workload_create(owner=alice, data=TINY_CPU_WORKLOAD)
    ordered = budget_services.workload_create(owner=alice, data={**TINY_CPU_WORKLOAD, "name": "ordered"})
    order = services.order_create(owner=alice, workload=ordered, configuration=cpu)
    job = services.acceptance_job_start(order)
    document = MeasurementDocument.model_validate(measurement_document(devices=[]))  # measured on the CPU host
    measurement, _ = services.measurement_record(order, document, source=MeasurementSource.UPLOAD)
    order.refresh_from_db()
    assert order.status == "accepted" and job.status == "queued", (order.status, job.status)  # decided by the upload

    ids = {
        "ArchitectureViewSet": architecture.slug,
        "AcceleratorViewSet": accelerator.slug,
        "ConfigurationViewSet": configuration.slug,
        "NodeViewSet": node.name,
        "RegisteredProgramViewSet": program.slug,
        "ModelPresetViewSet": next(iter(load_presets())),
        "WorkloadViewSet": workload.pk,
        "WorkloadRecommendationsView": workload.pk,
        "OrderViewSet": order.pk,
        "AcceptanceJobViewSet": job.pk,
        "MeasurementViewSet": measurement.pk,
    }
    clients = {"anonymous": _client(None), "alice": _client(alice), "bob": _client(bob), "staff": _client(staff),
               "bare_staff": _client(bare_staff)}  # fmt: skip
    rows = {"workload": workload.pk, "order": order.pk, "job": job.pk, "measurement": measurement.pk}
    return World(clients, ids, rows)


_GROUP = re.compile(r"\(\?P<(\w+)>(?:[^()\\]|\\.)*\)")
_CONVERTER = re.compile(r"<(?:(\w+):)?(\w+)>")


def concrete(endpoint: Endpoint, world: World) -> str:
    """The pattern with each keyword filled in: the view's object for ids and slugs, ``json`` for formats."""

    def value(name: str) -> str:
        return "json" if name == "format" else str(world.ids[endpoint.view])

    path = _GROUP.sub(lambda m: value(m.group(1)), endpoint.route)
    path = _CONVERTER.sub(lambda m: ".json" if m.group(1) == "drf_format_suffix" else value(m.group(2)), path)
    path = "/" + path.replace("$", "").replace("/?", "").replace("\\.", ".")
    match = resolve(path)  # the path is the pattern's own, not a neighbour's
    assert match.route == endpoint.route, (path, match.route, endpoint.route)
    return path


def call(client: APIClient, method: str, path: str) -> Any:
    with transaction.atomic():
        if method in ("POST", "PUT", "PATCH"):
            response = client.generic(method, path, json.dumps({}), content_type="application/json")
        else:
            response = client.generic(method, path)
        transaction.set_rollback(True)
    return response


def _ids(response: Any) -> set[int]:
    body = response.json()
    rows = body["results"] if isinstance(body, dict) and "results" in body else body
    return {row["id"] for row in rows}


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=str)
def test_access(endpoint: Endpoint, world: World) -> None:
    rule = rule_for(endpoint)
    path = concrete(endpoint, world)
    wrong = []
    for role in ROLES:
        if rule.kind == "public" and role != "anonymous":
            continue  # the sign-in pages are for signing in
        response = call(world.clients[role], endpoint.method, path)
        want = expected(rule, role, endpoint.method)
        if response.status_code != want:
            wrong.append(f"{role}: {response.status_code} (expected {want}) {response.content[:160]!r}")
        elif rule.listing and role == "bob" and world.alice_rows[rule.listing] in _ids(response):
            wrong.append(f"bob sees alice's {rule.listing} in {path}")
        elif rule.listing and role in ("alice", "staff") and world.alice_rows[rule.listing] not in _ids(response):
            wrong.append(f"{role} does not see alice's {rule.listing} in {path}")
    assert not wrong, f"{endpoint} ({path}):\n  " + "\n  ".join(wrong)


# --- filters must not reveal other users' rows either ------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("path", "parameter", "kind"),
    [
        ("/api/v1/orders/", "workload", "workload"),
        ("/api/v1/acceptance-jobs/", "order", "order"),
        ("/api/v1/measurements/", "order", "order"),
    ],
)
def test_filtering_by_another_users_row_answers_as_for_a_missing_one(world, path, parameter, kind) -> None:
    bob = world.clients["bob"]
    theirs = bob.get(path, {parameter: world.alice_rows[kind]})
    missing = bob.get(path, {parameter: 10**9})
    assert (theirs.status_code, theirs.json()) == (missing.status_code, missing.json())
    assert world.clients["alice"].get(path, {parameter: world.alice_rows[kind]}).status_code == 200


# --- upload tokens ----------------------------------------------------------------------------------------------


@pytest.fixture
def two_orders(db, django_user_model):
    """alice's order and bob's, on the CPU configuration; alice's with an upload token."""
    alice = django_user_model.objects.create_user(username="alice", password="alice-password-123")
    bob = django_user_model.objects.create_user(username="bob", password="bob-password-123")
    cpu = cpu_configuration()
    orders = {}
    for user in (alice, bob):
        workload = budget_services.workload_create(owner=user, data=TINY_CPU_WORKLOAD)
        orders[user.username] = services.order_create(owner=user, workload=workload, configuration=cpu)
    token = services.order_upload_token_issue(orders["alice"])
    return alice, orders, token


def _upload(order_id: int, authorization: str) -> Any:
    client = APIClient()
    return client.post(f"/api/v1/orders/{order_id}/measurements/", measurement_document(), format="json",
                       HTTP_AUTHORIZATION=authorization)  # fmt: skip


def test_an_upload_token_uploads_to_its_own_order_only(two_orders) -> None:
    alice, orders, token = two_orders
    other_of_alice = services.order_create(owner=alice, workload=orders["alice"].workload,
                                           configuration=orders["alice"].configuration)  # fmt: skip
    services.order_upload_token_issue(other_of_alice)  # has a token too: just not this one
    for order in (orders["bob"], other_of_alice):
        response = _upload(order.pk, f"Upload {token}")
        detail = response.json()["detail"]
        assert (
            response.status_code == 401
            and detail == f"This upload token is for order {orders['alice'].pk}, not order {order.pk}."
        )
    assert _upload(10**9, f"Upload {token}").status_code == 401
    assert _upload(orders["alice"].pk, f"Upload {token}").status_code == 201
    # It uploads and does nothing else: no reads, not even of its own order.
    for path in (f"/api/v1/orders/{orders['alice'].pk}/", f"/api/v1/orders/{orders['alice'].pk}/measurements/"):
        assert APIClient().get(path, HTTP_AUTHORIZATION=f"Upload {token}").status_code == 401
    assert APIClient().get("/api/v1/workloads/", HTTP_AUTHORIZATION=f"Token {token}").status_code == 401


def test_a_users_password_or_api_token_is_not_an_upload_token(two_orders) -> None:
    alice, orders, token = two_orders
    api_token = Token.objects.create(user=alice).key
    basic = base64.b64encode(b"alice:alice-password-123").decode()
    for authorization in ("Upload alice-password-123", f"Upload {api_token}", f"Basic {basic}", "Upload ", ""):
        response = _upload(orders["alice"].pk, authorization)
        assert response.status_code == 401, (authorization, response.status_code)
    # A password is no API credential at all (no basic authentication); the API token reads, never uploads.
    assert APIClient().get("/api/v1/workloads/", HTTP_AUTHORIZATION=f"Basic {basic}").status_code == 401
    assert APIClient().get("/api/v1/workloads/", HTTP_AUTHORIZATION=f"Token {api_token}").status_code == 200
    # A re-issued token replaces the old one.
    services.order_upload_token_issue(orders["alice"])
    assert _upload(orders["alice"].pk, f"Upload {token}").status_code == 401
