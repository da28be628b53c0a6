from rest_framework.routers import DefaultRouter

from .views import AcceleratorViewSet, ArchitectureViewSet, ConfigurationViewSet, NodeViewSet

router = DefaultRouter()
router.register("architectures", ArchitectureViewSet, basename="architecture")
router.register("accelerators", AcceleratorViewSet, basename="accelerator")
router.register("configurations", ConfigurationViewSet, basename="configuration")
router.register("nodes", NodeViewSet, basename="node")

urlpatterns = router.urls
