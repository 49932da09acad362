"""Page URLs. Paths are binding (docs/pages.md): invitations and reminders
link to them. Each page module lists its own ``urlpatterns``."""

from django.urls import path

from . import views

urlpatterns = [
    path("", views.home, name="home"),
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
]
