from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from .login_limit import LoginLimitedAuthenticationForm, refusal_status
from .views import home

# rest_framework.urls, with the sign-in limit on the login form (vramplan/login_limit.py)
api_auth = (
    [
        path("login/", refusal_status(auth_views.LoginView.as_view(
            template_name="rest_framework/login.html", authentication_form=LoginLimitedAuthenticationForm)),
            name="login"),
        path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    ],
    "rest_framework",
)  # fmt: skip

urlpatterns = [
    path("", home, name="home"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("catalog.api.urls")),
    path("api/v1/", include("budgets.api.urls")),
    path("api/v1/", include("measurements.api.urls")),
    path("api/v1/", include("recommendations.api.urls")),
    path("api-auth/", include(api_auth)),  # session sign-in for the browsable API and docs
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="redoc"),
]

handler404 = "vramplan.api.not_found"
