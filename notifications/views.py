"""The notifications pages: the list (from the header's link), the e-mail
preferences on the account pages, and the one-click unsubscribe from a
mail's link, which works without signing in (docs/notifications.md)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST

from . import selectors, services
from .forms import PreferencesForm
from .kinds import KINDS
from .models import Notification

PAGE_SIZE = 50


def _user(request: HttpRequest) -> User:
    return request.user  # type: ignore[return-value]  # login_required: a signed-in User


@login_required
def notification_list_page(request: HttpRequest) -> HttpResponse:
    """The signed-in person's notifications, newest first, 50 a page."""
    page = Paginator(selectors.notification_list(user=_user(request)), PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "notifications/list.html", {"page": page})


@login_required
@require_POST
def notification_read(request: HttpRequest, pk: int) -> HttpResponse:
    """Mark one of one's notifications read; another's is left alone (404)."""
    try:
        notification = selectors.notification_get(user=_user(request), pk=pk)
    except Notification.DoesNotExist:
        raise Http404("No such notification.") from None
    services.notifications_mark_read(user=_user(request), ids=[notification.pk])
    if request.POST.get("open"):  # the list's links: read it and go there (a path of this site only)
        return redirect(
            notification.link if notification.link.startswith("/") and not notification.link.startswith("//") else "/"
        )
    return redirect("notifications")


@login_required
@require_POST
def notifications_read_all(request: HttpRequest) -> HttpResponse:
    """Mark all of one's notifications read."""
    count = services.notifications_mark_read(user=_user(request))
    messages.success(request, f"{count} notification{'s' if count != 1 else ''} marked read.")
    return redirect("notifications")


@login_required
@require_http_methods(["GET", "POST"])
def preferences_page(request: HttpRequest) -> HttpResponse:
    """Each kind e-mailed or not, and the daily digest."""
    user = _user(request)
    preference = selectors.preference_get(user=user)
    if request.method == "POST":
        form = PreferencesForm(request.POST, email_off=preference.email_off)
        if form.is_valid():
            services.preferences_set(user=user, email_off=form.email_off(), digest=form.cleaned_data["digest"])
            messages.success(request, "Your notification preferences are saved.")
            return redirect("notification_preferences")
    else:
        form = PreferencesForm(initial={"digest": preference.digest}, email_off=preference.email_off)
    return render(request, "notifications/preferences.html", {"form": form, "has_email": bool(user.email)})


@csrf_exempt  # one-click (RFC 8058): the mail client POSTs without a session; the signed token is the proof
@require_http_methods(["GET", "POST"])
def unsubscribe_page(request: HttpRequest, token: str) -> HttpResponse:
    """GET: what the link stops and a button; POST: stop it. The token,
    signed for one user and one kind (or all), is all it needs: no
    session, and nothing else is changed or shown (not even the address)."""
    found = services.unsubscribe_read(token=token)
    if found is None:
        response = render(request, "notifications/unsubscribe.html", {"invalid": True}, status=400)
    else:
        user, kind = found
        what = "every notification e-mail" if kind == services.ALL_KINDS else f"e-mails of “{KINDS[kind]}”"
        done = request.method == "POST"
        if done:
            services.unsubscribe(user=user, kind=kind)
        response = render(request, "notifications/unsubscribe.html", {"what": what, "done": done, "token": token})
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    return response
