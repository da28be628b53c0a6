"""Fuzz every API operation from the project's own OpenAPI schema (schemathesis on Hypothesis).

The schema is generated in-process by drf-spectacular, as GET /api/schema/ serves it. Every operation
is called through Django's WSGI application (as ``vramplan.wsgi`` builds it, without that module's
garbage-collector tuning for the web process), signed in with the DRF token of
a staff user (``test_api_as_staff``) and of a normal user (``test_api_as_user``), against a database
holding the real catalog (``loadcatalog``, once per session: tests/conftest.py), one stored workload
of the normal user, one of another user, and a node. Path parameters are drawn both by the schema and
from the real identifiers, so reads, updates and deletes reach real rows as well as missing ones.

Each response must not be a 5xx (a server-side exception fails the test with its traceback and the
request as a curl line), must conform to the schema (status code, content type, body and headers),
and the same request without credentials must be refused (401). Every generated request runs in a
savepoint that is rolled back, so each example sees the same database: with derandomized Hypothesis
the run is reproducible.

The schema is built in a fixture, not at import: collecting this module costs nothing, and the
operations run as subtests of two tests. ``slow``: `make test-fast` leaves it out.

Bounded for a 2-core machine (about a minute): 20 generated requests per operation and role (valid
and invalid data), plus schemathesis' deterministic coverage phase (boundary values, missing and
invalid fields, unexpected methods) on the operations in STAFF_COVERAGE and USER_COVERAGE.

The tests at the end pin the bugs this fuzzing found (a 500 on deleting a referenced catalog row, NUL
bytes reaching PostgreSQL, three schema mismatches), now fixed.
"""

from __future__ import annotations

import functools
import json
import sys
import traceback
from pathlib import Path

import jsonschema_rs
import pytest
import schemathesis
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.core.cache import cache
from django.core.signals import got_request_exception, request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections, connection, transaction
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from werkzeug.test import Client

from budgets import services
from budgets.engine import load_presets
from catalog.models import Accelerator, Architecture, Configuration, Node
from measurements import services as measurement_services
from measurements.choices import MeasurementSource
from measurements.models import AcceptanceJob
from tests.measurements.helpers import measurement_document

application = get_wsgi_application()  # vramplan.wsgi's application; importing it would tune this process's GC

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
ON_POSTGRES = connection.vendor == "postgresql"
MAX_EXAMPLES = 20

# The coverage phase walks each field's boundaries and invalid values: hundreds of requests per
# operation with a body. It runs once per distinct validation path: each catalog serializer on create
# and each FilterSet (staff), the pydantic workload body on create, which validates, estimates and
# stores (user; POST /estimate runs the same validation without storing). Updates and deletes on
# random path values stop at the 404 before any validation: they get the generated examples only.
STAFF_COVERAGE = [
    "v1_accelerators_create",
    "v1_architectures_create",
    "v1_configurations_create",
    "v1_nodes_create",
    "v1_accelerators_list",
    "v1_architectures_list",
    "v1_configurations_list",
    "v1_nodes_list",
]
USER_COVERAGE = ["v1_workloads_create", "v1_workloads_list", "v1_model_presets_list"]


def _config(coverage: list[str]) -> schemathesis.Config:
    return schemathesis.Config.from_dict(
        {
            "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True, "database": "none"},
            "phases": {"coverage": {"enabled": False}},
            "operations": [{"include-operation-id": coverage, "phases": {"coverage": {"enabled": True}}}]
            if coverage
            else [],
            "checks": {
                # Request-side checks: the schema cannot say that a slug must name an existing row
                # (schema-valid data rejected) and DRF's pagination ignores a malformed limit/offset
                # (invalid data accepted). The response checks all stay on.
                "positive_data_acceptance": {"enabled": False},
                "negative_data_rejection": {"enabled": False},
            },
            # Reproductions must be exact: the sanitizer would mask e.g. "num_key_value_heads" values.
            "output": {"sanitization": {"enabled": False}},
            # Timing-based: generating the large workload body on a loaded 2-core CI machine is not a bug.
            "suppress-health-check": ["too_slow"],
        }
    )


@functools.cache
def _raw_schema() -> dict:
    """The OpenAPI document exactly as GET /api/schema/?format=json renders it (built on first use)."""
    document = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(document, renderer_context={}))


# Real identifiers by path template, filled by the ``world`` fixture before any example is drawn.
KNOWN_IDS: dict[str, tuple[str, list]] = {}


# --- The two runs --------------------------------------------------------------------------------------


def _schema(coverage: list[str]):
    schema = schemathesis.openapi.from_dict(_raw_schema(), config=_config(coverage))
    schema.app = application

    @schema.hook
    def flatmap_path_parameters(context, path_parameters):
        known = KNOWN_IDS.get(context.operation.path)
        if known is None or not isinstance(path_parameters, dict):
            return st.just(path_parameters)
        name, values = known
        real = st.sampled_from(values).map(lambda value: {**path_parameters, name: value})
        return st.one_of(st.just(path_parameters), real)

    return schema


# Built on ``world``, so that a test of these schemas has it (and the catalog layer under it) in its fixture
# closure: schemathesis asks for the test's own fixtures only when it runs.
@pytest.fixture(scope="module")
def staff_api_schema(world):
    return _schema(STAFF_COVERAGE)


@pytest.fixture(scope="module")
def user_api_schema(world):
    return _schema(USER_COVERAGE)


staff_schema = schemathesis.pytest.from_fixture("staff_api_schema")
user_schema = schemathesis.pytest.from_fixture("user_api_schema")


@pytest.fixture(autouse=True)
def _node_id_for_lazy_schemas(request):
    """schemathesis 4.32's from_fixture reads and rewrites ``node._nodeid`` (to name each operation's
    subtest), an attribute pytest 9 no longer has: give the test its own, as a plain attribute."""
    if not hasattr(request.node, "_nodeid"):
        request.node._nodeid = request.node.nodeid


class World:
    def __init__(self) -> None:
        self.tokens: dict[str, str] = {}
        self.exceptions: list = []
        self.referenced: dict[str, str] = {}
        self.own_workload = 0

    def remember_exception(self, sender, **kwargs) -> None:
        self.exceptions.append(sys.exc_info())


@pytest.fixture(scope="module")
def world(catalog_layer, django_db_blocker):
    """Users, tokens, workloads and a node on the session's catalog, in one transaction rolled back at the end."""
    assert catalog_layer.is_open, "the catalog layer opens before the first test that uses it (tests/conftest.py)"
    world = World()
    # Like django.test.Client: a request must not close the connection that holds the test transaction.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    got_request_exception.connect(world.remember_exception)
    try:
        with django_db_blocker.unblock(), transaction.atomic():
            users = get_user_model().objects
            staff = users.create_user(username="fuzz-staff", password="fuzz-staff-password-1", is_staff=True)
            # catalog writes need the model permissions, as in the admin (catalog.api.permissions)
            staff.user_permissions.set(Permission.objects.filter(content_type__app_label="catalog"))
            user = users.create_user(username="fuzz-user", password="fuzz-user-password-1")
            other = users.create_user(username="fuzz-other", password="fuzz-other-password-1")
            workloads = ROOT / "fixtures" / "workloads"
            mine = services.workload_create(
                owner=user, data=json.loads((workloads / "vllm-llama-3.1-8b-chat.json").read_text())
            )
            theirs = services.workload_create(
                owner=other, data=json.loads((workloads / "cpu-gpt2-generate.json").read_text())
            )
            configuration = Configuration.objects.order_by("slug").first()
            node = Node.objects.create(name="fuzz-node-1", configuration=configuration, hostname="fuzz-1")
            world.tokens = {"staff": Token.objects.create(user=staff).key, "user": Token.objects.create(user=user).key}
            accelerator = Accelerator.objects.filter(configurations__isnull=False).order_by("slug").first()
            world.referenced = {
                "architectures": accelerator.architecture.slug,
                "accelerators": accelerator.slug,
                "configurations": configuration.slug,
            }

            def slugs(model) -> list[str]:
                return sorted(model.objects.values_list("slug", flat=True))

            world.own_workload = mine.pk
            workload_ids = [mine.pk, theirs.pk]
            # An order of the user's with a job and an uploaded measurement, and one of the other user's.
            order = measurement_services.order_create(owner=user, workload=mine, configuration=configuration)
            their_order = measurement_services.order_create(owner=other, workload=theirs, configuration=configuration)
            job = AcceptanceJob.objects.create(order=order)
            measurement, _ = measurement_services.measurement_record(
                order, measurement_document(), source=MeasurementSource.UPLOAD
            )
            order_ids = [order.pk, their_order.pk]
            KNOWN_IDS.update(
                {
                    "/api/v1/architectures/{slug}/": ("slug", slugs(Architecture)),
                    "/api/v1/accelerators/{slug}/": ("slug", slugs(Accelerator)),
                    "/api/v1/configurations/{slug}/": ("slug", slugs(Configuration)),
                    "/api/v1/nodes/{name}/": ("name", [node.name]),
                    "/api/v1/workloads/{id}/": ("id", workload_ids),
                    "/api/v1/workloads/{id}/budget/": ("id", workload_ids),
                    "/api/v1/workloads/{id}/recommendations/": ("id", workload_ids),
                    "/api/v1/model-presets/{id}/": ("id", sorted(load_presets())),
                    **{
                        f"/api/v1/orders/{{id}}/{action}": ("id", order_ids)
                        for action in ("", "confirm/", "cancel/", "upload-token/", "acceptance-jobs/", "measurements/")
                    },
                    "/api/v1/acceptance-jobs/{id}/": ("id", [job.pk]),
                    "/api/v1/acceptance-jobs/{id}/cancel/": ("id", [job.pk]),
                    "/api/v1/measurements/{id}/": ("id", [measurement.pk]),
                    "/api/v1/programs/{slug}/": ("slug", ["vllm-serve"]),
                }
            )
            yield world
            transaction.set_rollback(True)
    finally:
        KNOWN_IDS.clear()
        got_request_exception.disconnect(world.remember_exception)
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def _call_and_validate(case, world: World, role: str) -> None:
    headers = {"Authorization": f"Token {world.tokens[role]}"}
    world.exceptions.clear()
    with transaction.atomic():
        cache.clear()  # the per-user throttle (600/minute) would answer 429 part-way through the run
        try:
            response = case.call(headers=headers)
            if world.exceptions:
                exc_type, exc, tb = world.exceptions[0]
                raise AssertionError(
                    f"{response.status_code} from {case.as_curl_command(headers=headers)}\n"
                    + "".join(traceback.format_exception(exc_type, exc, tb))
                )
            case.validate_response(response, headers=headers)
        finally:
            transaction.set_rollback(True)


@staff_schema.parametrize()
def test_api_as_staff(case, world) -> None:
    _call_and_validate(case, world, "staff")


@user_schema.parametrize()
def test_api_as_user(case, world) -> None:
    _call_and_validate(case, world, "user")


# --- Regression tests for the bugs this fuzzing found, now fixed ------------------------------------------


def _request(world: World, role: str, method: str, path: str, **kwargs):
    """One request through the same WSGI application, in a savepoint rolled back afterwards."""
    world.exceptions.clear()
    with transaction.atomic():
        cache.clear()
        response = Client(application).open(
            path, method=method, headers={"Authorization": f"Token {world.tokens[role]}"}, **kwargs
        )
        transaction.set_rollback(True)
    return response


def _raised(world: World) -> str:
    return "; ".join(f"{kind.__name__}: {exc}" for kind, exc, _ in world.exceptions) or "no exception"


@pytest.mark.parametrize("collection", ["architectures", "accelerators", "configurations"])
def test_delete_of_referenced_catalog_row_is_a_409_naming_them(world, collection) -> None:
    response = _request(world, "staff", "DELETE", f"/api/v1/{collection}/{world.referenced[collection]}/")
    assert response.status_code == 409, _raised(world)
    assert "Still referenced by" in response.json["detail"]


def test_400_bodies_match_the_documented_schema(world) -> None:
    documented = _raw_schema()["paths"]["/api/v1/accelerators/"]["get"]["responses"]["400"]
    document = {**documented["content"]["application/json"]["schema"], "components": _raw_schema()["components"]}
    validator = jsonschema_rs.validator_for(document)
    field_errors = _request(world, "user", "GET", "/api/v1/accelerators/", query_string={"vendor": "nope"})
    parse_error = _request(world, "user", "POST", "/api/v1/estimate", json=[])
    assert field_errors.status_code == parse_error.status_code == 400
    assert validator.is_valid(field_errors.json), field_errors.json
    assert validator.is_valid(parse_error.json), parse_error.json


def test_budget_calibration_null_matches_the_schema(world) -> None:
    response = _request(world, "user", "GET", f"/api/v1/workloads/{world.own_workload}/budget/")
    assert response.status_code == 200
    assert response.json["calibration"] is None
    calibration = _raw_schema()["components"]["schemas"]["BudgetDocument"]["properties"]["calibration"]
    assert jsonschema_rs.validator_for(calibration).is_valid(None)


@pytest.mark.parametrize("path", ["/api/v1/accelerators/a100./", "/api/v1/workloads/0.5/"])
def test_unroutable_api_paths_are_json_404s(world, path) -> None:
    response = _request(world, "user", "GET", path)
    assert response.status_code == 404
    assert response.mimetype == "application/json", response.content_type


@pytest.mark.parametrize(
    "method,path,body,field",
    [
        ("GET", "/api/v1/accelerators/%00/", None, None),
        ("POST", "/api/v1/architectures/", {"slug": "x", "name": "x", "family": "x", "vendor": "\x00"}, "vendor"),
        ("POST", "/api/v1/workloads/", {"name": "chat\x00", "model": {"preset": "gpt2"}}, "name"),
        (
            "POST",
            "/api/v1/workloads/",
            {"task": "custom", "custom": {"components": [{"name": "x\x00", "category": "weights", "bytes": 1}]}},
            "custom.components.0.name",
        ),
    ],
)
def test_nul_bytes_are_a_400_not_a_database_error(world, method, path, body, field) -> None:
    response = _request(world, "staff", method, path, json=body)
    assert response.status_code == 400, _raised(world)
    if field is None:
        assert "NUL" in response.json["detail"]
    else:  # a body's NUL is a field error, keyed by where it was (vramplan/parsers.py)
        assert "NUL" in response.json[field][0], response.json
