from django.urls import re_path

from .views import RecommendView, WorkloadRecommendationsView

urlpatterns = [
    re_path(
        r"^workloads/(?P<id>[0-9]+)/recommendations/?$",
        WorkloadRecommendationsView.as_view(),
        name="workload-recommendations",
    ),
    re_path(r"^recommend/?$", RecommendView.as_view(), name="recommend"),
]
