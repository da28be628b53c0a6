from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", include("catalog.api.urls")),
    path("api/v1/", include("budgets.api.urls")),
    path("api/v1/", include("measurements.api.urls")),
    path("api/v1/", include("recommendations.api.urls")),
    path("api-auth/", include("rest_framework.urls")),  # session sign-in for the browsable API and docs
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="redoc"),
]

handler404 = "vramplan.api.not_found"
