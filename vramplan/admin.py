"""The vramplan admin site: branded, with the calibration page beside the measurements and failed sign-ins
limited (``vramplan.login_limit``).

Installed through ``vramplan.apps.AdminConfig`` (Django's documented way to replace the default site), so
every ``@admin.register`` in the apps lands here.
"""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, URLResolver, path

from recommendations.admin_views import calibration_view

from .login_limit import LoginLimitedAdminAuthenticationForm, with_refusal_status


class VramplanAdminSite(admin.AdminSite):
    site_header = "vramplan"
    site_title = "vramplan admin"
    index_title = "Catalog, workloads, orders and measurements"
    login_form = LoginLimitedAdminAuthenticationForm  # failed sign-ins are limited (vramplan/login_limit.py)
    # the app list stays on the index and in the breadcrumbs; beside a list it took 300 px a 1,400 px screen needs
    # for the configurations and recommendations tables (tests/browser/test_first_hour.py)
    enable_nav_sidebar = False

    def get_urls(self) -> list[URLResolver | URLPattern]:
        calibration = path("measurements/calibration/", self.admin_view(self.calibration), name="calibration")
        return [calibration, *super().get_urls()]

    def login(self, request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
        return with_refusal_status(super().login(request, extra_context))

    def calibration(self, request: HttpRequest) -> HttpResponse:
        return calibration_view(request, self)
