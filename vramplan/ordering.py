"""`?ordering=` with empty values last, whichever the direction: a configuration without a price is not the cheapest
(PostgreSQL sorts NULL first in descending order and SQLite first in ascending order otherwise)."""

from __future__ import annotations

from typing import Any

from django.db.models import F, QuerySet
from rest_framework.filters import OrderingFilter


class NullsLastOrderingFilter(OrderingFilter):
    def filter_queryset(self, request: Any, queryset: QuerySet, view: Any) -> QuerySet:
        ordering = self.get_ordering(request, queryset, view)
        if not ordering:
            return queryset
        terms = [
            F(term[1:]).desc(nulls_last=True) if term.startswith("-") else F(term).asc(nulls_last=True)
            for term in ordering
        ]
        return queryset.order_by(*terms)
