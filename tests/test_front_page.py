"""Finding your way (issue 16, first hour, item 7): `/` says what this is and links the API docs, the admin and the
calibration page; the admin's index links the calibration page and its "View site" lands on `/`."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db


def test_the_front_page_says_what_this_is_and_links_the_places_to_go(client, admin_client) -> None:
    response = client.get("/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "Will this workload fit on that hardware" in page
    links = set(re.findall(r'href="([^"]+)"', page))
    assert {"/api/docs/", "/api/redoc/", "/api/schema/", "/admin/", "/admin/measurements/calibration/"} <= links
    assert client.get("/api-auth/login/").status_code == 200
    for link in ("/api/docs/", "/api/redoc/", "/api/schema/", "/admin/measurements/calibration/"):
        assert admin_client.get(link).status_code == 200, link  # signed in (the docs need an account)


def test_the_admin_index_links_calibration_and_view_site_lands_on_the_front_page(admin_client) -> None:
    page = admin_client.get("/admin/").content.decode()
    assert 'href="/admin/measurements/calibration/"' in page
    view_site = re.search(r'<a href="([^"]+)">View site</a>', page)
    assert view_site is not None and admin_client.get(view_site.group(1)).status_code == 200
