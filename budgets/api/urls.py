from django.urls import re_path
from rest_framework.routers import DefaultRouter

from .views import EstimateView, ModelPresetViewSet, WorkloadViewSet

router = DefaultRouter(trailing_slash="/?")  # /workloads/7/budget and /workloads/7/budget/ alike
router.include_root_view = False
router.register("workloads", WorkloadViewSet, basename="workload")
router.register("model-presets", ModelPresetViewSet, basename="model-preset")

urlpatterns = [
    re_path(r"^estimate/?$", EstimateView.as_view(), name="estimate"),
    *router.urls,
]
