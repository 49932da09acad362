"""Page URLs. Paths are binding (docs/pages.md): invitations and reminders
link to them. Grouped by the area of the pages (workspace/views/)."""

from django.urls import path

from . import views
from .views import designer, expert, history, invitations, rounds, studies

urlpatterns = [
    path("", views.home, name="home"),
    # --- studyhome: the dashboard's invitations, a study's home and phases ---
    path("invitations/<int:invitation_id>/accept/", studies.invitation_accept, name="invitation_accept"),
    path("invitations/<int:invitation_id>/decline/", studies.invitation_decline, name="invitation_decline"),
    path("studies/<int:study_id>/", studies.study_home, name="study_home"),
    path("studies/<int:study_id>/live/", studies.study_home_live, name="study_home_live"),
    path("studies/<int:study_id>/phase/<slug:to>/", studies.study_phase, name="study_phase"),
    path("studies/<int:study_id>/delete/", studies.study_delete, name="study_delete"),
    path("studies/<int:study_id>/rounds/", rounds.rounds_page, name="rounds_page"),
    path("studies/<int:study_id>/rounds/open/", rounds.round_open_page, name="round_open"),
    path("studies/<int:study_id>/rounds/close/", rounds.round_close_page, name="round_close"),
    path("studies/<int:study_id>/my/round/<slug:step>/", rounds.round_respond_page, name="round_respond"),
    path("studies/<int:study_id>/history/", history.history_page, name="study_history"),
    # --- discussion: the page, and where its forms post ---
    path("studies/<int:study_id>/discussion/", views.discussion_page, name="discussion"),
    path(
        "studies/<int:study_id>/discussion/attributes/<int:pk>/",
        views.thread_post_page,
        {"kind": "attribute"},
        name="discussion_attribute",
    ),
    path(
        "studies/<int:study_id>/discussion/metrics/<int:pk>/",
        views.thread_post_page,
        {"kind": "metric"},
        name="discussion_metric",
    ),
    path("studies/<int:study_id>/discussion/posts/<int:pk>/edit/", views.post_edit_page, name="discussion_post_edit"),
    path(
        "studies/<int:study_id>/discussion/posts/<int:pk>/hide/",
        views.post_visibility_page,
        {"hide": True},
        name="discussion_post_hide",
    ),
    path(
        "studies/<int:study_id>/discussion/posts/<int:pk>/unhide/",
        views.post_visibility_page,
        {"hide": False},
        name="discussion_post_unhide",
    ),
    # --- expert: the four steps of an expert, and their live previews ---
    path("studies/<int:study_id>/my/", studies.my_steps, name="my_steps"),
    path("studies/<int:study_id>/my/votes/", expert.votes_page, name="expert_votes"),
    path("studies/<int:study_id>/my/priorities/", expert.priorities_page, name="expert_priorities"),
    path("studies/<int:study_id>/my/priorities/preview/", expert.priorities_preview, name="expert_priorities_preview"),
    path("studies/<int:study_id>/my/ranges/", expert.ranges_page, name="expert_ranges"),
    path("studies/<int:study_id>/my/ranges/preview/", expert.ranges_preview, name="expert_ranges_preview"),
    path("studies/<int:study_id>/my/peer-weights/", expert.peer_weights_page, name="expert_peer_weights"),
    # --- designer: the console and joining by link ---
    path("studies/new/", designer.StudyNewPage.as_view(), name="study_new"),
    path("studies/<int:study_id>/setup/", designer.setup_page, name="study_setup"),
    path("studies/<int:study_id>/setup/<str:kind>/add/", designer.setup_item_add, name="setup_item_add"),
    path("studies/<int:study_id>/setup/<str:kind>/<int:pk>/", designer.setup_item_edit, name="setup_item_edit"),
    path(
        "studies/<int:study_id>/setup/<str:kind>/<int:pk>/remove/",
        designer.setup_item_remove,
        name="setup_item_remove",
    ),
    path("studies/<int:study_id>/measurements/", designer.measurements_page, name="study_measurements"),
    path("studies/<int:study_id>/measurements/csv/", designer.measurements_csv, name="measurements_csv"),
    path(
        "studies/<int:study_id>/measurements.csv",
        designer.measurements_csv_download,
        name="measurements_csv_download",
    ),
    path("studies/<int:study_id>/bundle.json", designer.study_bundle_download, name="study_bundle_download"),
    path("studies/<int:study_id>/copy/", designer.study_copy_page, name="study_copy"),
    path("studies/<int:study_id>/experts/", designer.experts_page, name="study_experts"),
    path("studies/<int:study_id>/experts/invite/", designer.expert_invite, name="expert_invite"),
    path("studies/<int:study_id>/experts/link/", designer.invitation_link_create, name="invitation_link_create"),
    path("studies/<int:study_id>/experts/invite-email/", designer.expert_invite_email, name="expert_invite_email"),
    path("studies/<int:study_id>/experts/remind/", designer.reminders_send, name="reminders_send"),
    path(
        "studies/<int:study_id>/experts/invitations/<int:pk>/revoke/",
        designer.invitation_revoke,
        name="invitation_revoke",
    ),
    path("studies/<int:study_id>/experts/<str:username>/remove/", designer.expert_remove, name="expert_remove"),
    path("studies/<int:study_id>/experts/<str:username>/exclude/", designer.expert_exclude, name="expert_exclude"),
    path("studies/<int:study_id>/experts/<str:username>/readmit/", designer.expert_readmit, name="expert_readmit"),
    path("studies/<int:study_id>/inputs/<str:username>/", designer.expert_inputs_page, name="expert_inputs"),
    path("invitations/<str:key>/", invitations.invitation_page, name="invitation"),
    path("invitations/<str:key>/decline/", invitations.invitation_decline_page, name="invitation_link_decline"),
]
