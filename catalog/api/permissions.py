"""Who may change the catalog through the API: the same rule the admin applies."""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS, DjangoModelPermissions


class CatalogPermission(DjangoModelPermissions):
    """Any authenticated user may read; a write needs a staff account *and* the model permission
    (``catalog.add_configuration``, ``catalog.change_accelerator``, ``catalog.delete_node``, …), as in the admin."""

    message = "Catalog changes need a staff account with the model's add/change/delete permission."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        if request.method in SAFE_METHODS:
            return True
        return bool(user.is_staff) and super().has_permission(request, view)
