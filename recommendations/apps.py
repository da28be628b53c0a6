from django.apps import AppConfig


class RecommendationsConfig(AppConfig):
    """Recommendations: the pure recommender (``recommend``, ``plans``, ``verdicts`` …) and its Django side
    (``views_data``, ``services``, the API and the ``recommend`` command). No models of its own."""

    name = "recommendations"
    default_auto_field = "django.db.models.BigAutoField"
