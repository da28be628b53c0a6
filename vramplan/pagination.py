"""Pagination with a ceiling: ``?limit=`` beyond MAX_LIMIT is clamped, never passed to the database."""

from rest_framework.pagination import LimitOffsetPagination


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 500

    def get_offset(self, request):
        # An offset past any real table (and past 64-bit integers) is a 400-worthy typo, not a query.
        return min(super().get_offset(request), 2**31)
