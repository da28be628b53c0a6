"""Permissions shared by every app's API."""

from rest_framework.permissions import SAFE_METHODS, DjangoModelPermissions


class IsStaffWithModelPermission(DjangoModelPermissions):
    """Any authenticated user may read; a write needs a staff account *and* the model's add/change/delete
    permission (``measurements.add_registeredprogram``, …), as in the admin: the catalog's rule
    (``catalog.api.permissions.CatalogPermission``) for the other staff-written tables."""

    message = "Changes need a staff account with the model's add/change/delete permission."

    def has_permission(self, request, view) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        if request.method in SAFE_METHODS:
            return True
        return bool(user.is_staff) and super().has_permission(request, view)
