"""Page URLs. Paths are binding (docs/pages.md): invitations and reminders
link to them. Each page module lists its own ``urlpatterns``."""

from django.urls import path

from . import views
from .views import expert

urlpatterns = [
    path("", views.home, name="home"),
    # --- expert: the four steps of an expert, and their live previews ---
    path("studies/<int:study_id>/my/votes/", expert.votes_page, name="expert_votes"),
    path("studies/<int:study_id>/my/priorities/", expert.priorities_page, name="expert_priorities"),
    path("studies/<int:study_id>/my/priorities/preview/", expert.priorities_preview, name="expert_priorities_preview"),
    path("studies/<int:study_id>/my/ranges/", expert.ranges_page, name="expert_ranges"),
    path("studies/<int:study_id>/my/ranges/preview/", expert.ranges_preview, name="expert_ranges_preview"),
    path("studies/<int:study_id>/my/peer-weights/", expert.peer_weights_page, name="expert_peer_weights"),
]
