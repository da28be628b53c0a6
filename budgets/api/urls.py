from django.urls import re_path
from rest_framework.routers import SimpleRouter

from .views import EstimateView, ModelPresetViewSet, WorkloadViewSet

router = SimpleRouter()
router.trailing_slash = "/?"  # /workloads/7/budget and /workloads/7/budget/ alike
router.register("workloads", WorkloadViewSet, basename="workload")
router.register("model-presets", ModelPresetViewSet, basename="model-preset")

urlpatterns = [
    re_path(r"^estimate/?$", EstimateView.as_view(), name="estimate"),
    *router.urls,
]
