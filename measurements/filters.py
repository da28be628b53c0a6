"""FilterSets for orders, jobs and measurements whose related-row filters accept only rows the user can see.

A plain ``filterset_fields = ["order"]`` validates the id against every order: another user's order id
answered 200 (an empty page) where a missing one answered 400, which tells anyone which ids exist. Here
the choices are ``visible_to(request.user)``, so another user's row and a missing row answer alike (400).
"""

from __future__ import annotations

from typing import Any

from django.db.models import Model, QuerySet
from django_filters import rest_framework as filters

from budgets.models import Workload

from .models import AcceptanceJob, Measurement, Order


def _visible(model: type[Model]) -> Any:
    def queryset(request: Any) -> QuerySet[Any]:
        if request is None:  # schema generation
            return model.objects.none()  # type: ignore[attr-defined]
        return model.objects.visible_to(request.user)  # type: ignore[attr-defined]

    return queryset


class OrderFilterSet(filters.FilterSet):
    workload = filters.ModelChoiceFilter(queryset=_visible(Workload))

    class Meta:
        model = Order
        fields = ["status", "workload"]


class AcceptanceJobFilterSet(filters.FilterSet):
    order = filters.ModelChoiceFilter(queryset=_visible(Order))

    class Meta:
        model = AcceptanceJob
        fields = ["status", "failure_kind", "order"]


class MeasurementFilterSet(filters.FilterSet):
    order = filters.ModelChoiceFilter(queryset=_visible(Order))

    class Meta:
        model = Measurement
        fields = ["order", "outcome", "source"]
