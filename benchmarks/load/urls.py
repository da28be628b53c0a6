"""The project's URLs plus ``/bench/ping``: a trivial DRF endpoint, the stack's own ceiling.

It goes through everything every API view does (token authentication, permission, throttle, JSON
rendering) and nothing else, so each endpoint's throughput is reported as a fraction of it.
"""

from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from vramplan.urls import handler404
from vramplan.urls import urlpatterns as project_urlpatterns

__all__ = ["handler404", "urlpatterns"]


class PingView(APIView):
    def get(self, request: Request) -> Response:
        return Response({"ok": True})


urlpatterns = [path("bench/ping", PingView.as_view(), name="bench-ping"), *project_urlpatterns]
