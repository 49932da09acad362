"""Pages about studies."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from ..selectors import studies_with_my_roles


@login_required
def home(request: HttpRequest) -> HttpResponse:
    """The studies the user designs or gives opinions in, with their roles."""
    return render(request, "workspace/home.html", {"studies": studies_with_my_roles(request.user)})
