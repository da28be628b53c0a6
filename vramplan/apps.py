from django.contrib.admin.apps import AdminConfig as DjangoAdminConfig


class AdminConfig(DjangoAdminConfig):
    default_site = "vramplan.admin.VramplanAdminSite"

    def ready(self) -> None:
        super().ready()
        from . import throttling  # noqa: F401  (registers the deploy check on the shared throttle cache)
