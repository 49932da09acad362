"""Page URLs. Paths are binding (docs/pages.md): invitations and reminders
link to them. Each page module lists its own ``urlpatterns``."""

from django.urls import path

from . import views

urlpatterns = [
    path("", views.home, name="home"),
]
