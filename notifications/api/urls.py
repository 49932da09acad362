"""The notifications REST endpoints, mounted under /api/v1/ (approve_site/urls.py).
Yours, like ``invitations/``: no user in the path."""

from django.urls import URLPattern, URLResolver, path

from . import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("notifications/", views.NotificationListView.as_view(), name="notification-list"),
    path("notifications/read/", views.NotificationsReadView.as_view(), name="notifications-read"),
    path("notifications/<int:pk>/read/", views.NotificationReadView.as_view(), name="notification-read"),
    path("notifications/preferences/", views.PreferencesView.as_view(), name="notification-preferences"),
]
