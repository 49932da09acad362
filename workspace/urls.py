"""Page URLs. Paths are binding (docs/pages.md): invitations and reminders
link to them. Each page module lists its own ``urlpatterns``."""

from django.urls import path

from . import views
from .views import designer, invitations

urlpatterns = [
    path("", views.home, name="home"),
    # --- designer: the console and joining by link ---
    path("studies/new/", designer.StudyNewPage.as_view(), name="study_new"),
    path("studies/<int:study_id>/setup/", designer.setup_page, name="study_setup"),
    path("studies/<int:study_id>/setup/<str:kind>/add/", designer.setup_item_add, name="setup_item_add"),
    path("studies/<int:study_id>/setup/<str:kind>/<int:pk>/", designer.setup_item_edit, name="setup_item_edit"),
    path(
        "studies/<int:study_id>/setup/<str:kind>/<int:pk>/remove/", designer.setup_item_remove,
        name="setup_item_remove",
    ),
    path("studies/<int:study_id>/measurements/", designer.measurements_page, name="study_measurements"),
    path("studies/<int:study_id>/measurements/csv/", designer.measurements_csv, name="measurements_csv"),
    path("studies/<int:study_id>/experts/", designer.experts_page, name="study_experts"),
    path("studies/<int:study_id>/experts/invite/", designer.expert_invite, name="expert_invite"),
    path("studies/<int:study_id>/experts/link/", designer.invitation_link_create, name="invitation_link_create"),
    path("studies/<int:study_id>/experts/remind/", designer.reminders_send, name="reminders_send"),
    path(
        "studies/<int:study_id>/experts/invitations/<int:pk>/revoke/", designer.invitation_revoke,
        name="invitation_revoke",
    ),
    path("studies/<int:study_id>/experts/<str:username>/remove/", designer.expert_remove, name="expert_remove"),
    path("studies/<int:study_id>/inputs/<str:username>/", designer.expert_inputs_page, name="expert_inputs"),
    path("invitations/<str:key>/", invitations.invitation_page, name="invitation"),
    path("invitations/<str:key>/decline/", invitations.invitation_decline_page, name="invitation_decline"),
]
