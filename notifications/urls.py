"""The notifications pages (docs/notifications.md)."""

from django.urls import URLPattern, URLResolver, path

from . import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("notifications/", views.notification_list_page, name="notifications"),
    path("notifications/read/", views.notifications_read_all, name="notifications_read_all"),
    path("notifications/<int:pk>/read/", views.notification_read, name="notification_read"),
    path("notifications/unsubscribe/<str:token>/", views.unsubscribe_page, name="notifications_unsubscribe"),
    path("accounts/notifications/", views.preferences_page, name="notification_preferences"),
]
