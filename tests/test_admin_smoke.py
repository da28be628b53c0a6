"""Every model registered in the admin: its changelist, add page and change page answer a superuser.

One object per model comes from the catalog (loadcatalog), a node, and a workload with an order, an
acceptance job and a measurement (tests.recommendations.measured); the test fails if a registered model
has none, so a newly registered model needs a row here before it is covered.
"""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.db.models import Model
from django.urls import reverse
from rest_framework.authtoken.models import Token

from catalog.models import Configuration
from measurements.models import RegisteredProgram
from tests.factories import NodeFactory
from tests.recommendations.measured import measured_workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def one_of_each(user, catalog) -> None:
    measured_workload(user)
    NodeFactory(configuration=Configuration.objects.first())
    Token.objects.create(user=user)
    Group.objects.create(name="reviewers")
    RegisteredProgram.objects.create(slug="serve", name="Serve", argv_template=["python3", "-m", "serve"])


def _urls(model: type[Model]) -> tuple[str, str, str]:
    info = (model._meta.app_label, model._meta.model_name)
    obj = model._default_manager.first()
    assert obj is not None, f"no {model._meta.label} to open: add one to the one_of_each fixture"
    return (
        reverse("admin:{}_{}_changelist".format(*info)),
        reverse("admin:{}_{}_add".format(*info)),
        reverse("admin:{}_{}_change".format(*info), args=[obj.pk]),
    )


def _check(admin_client, model: type[Model]) -> None:
    model_admin = admin.site._registry[model]
    changelist, add, change = _urls(model)
    response = admin_client.get(changelist)
    assert response.status_code == 200
    if model_admin.search_fields:
        assert admin_client.get(f"{changelist}?q=a").status_code == 200
    can_add = model_admin.has_add_permission(response.wsgi_request)
    assert admin_client.get(add).status_code == (200 if can_add else 403)
    page = admin_client.get(change)
    assert page.status_code == 200
    assert "vramplan" in page.content.decode()  # the branded site, not the default one


def test_changelist_add_and_change_pages_of_every_registered_model_answer(admin_client, one_of_each, subtests) -> None:
    models = sorted(admin.site._registry, key=lambda m: m._meta.label)
    assert len(models) >= 16  # catalog, budgets, measurements, auth and tokens
    for model in models:
        with subtests.test(model=model._meta.label):
            _check(admin_client, model)
