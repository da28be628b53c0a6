from rest_framework.routers import SimpleRouter

from .views import AcceptanceJobViewSet, MeasurementViewSet, OrderViewSet, RegisteredProgramViewSet

router = SimpleRouter()
router.register("orders", OrderViewSet, basename="order")
router.register("acceptance-jobs", AcceptanceJobViewSet, basename="acceptance-job")
router.register("measurements", MeasurementViewSet, basename="measurement")
router.register("programs", RegisteredProgramViewSet, basename="program")

urlpatterns = router.urls
