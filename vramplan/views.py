"""The site's front page: what vramplan is and where to go from here (the API, its docs, the admin)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html")
