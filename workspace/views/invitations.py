"""Joining a study through an invitation link (``/invitations/{key}/``).

Anyone holding the link may open it. A used, revoked or expired key says
so; a logged-in person accepts or declines; a new person chooses a
username and password and joins in one step (account and membership in
one transaction); someone with an account who is not logged in is sent to
log in and comes back here.
"""

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_http_methods

from .. import invitations, selectors, services
from ..errors import InvalidInput, ServiceError
from ..forms.designer import SignupForm
from ..models import Invitation
from .common import form_add_service_errors
from .designer import study_home


def _unknown(request: HttpRequest) -> HttpResponse:
    return _no_store(render(request, "invitations/unknown.html", status=404))


def _no_store(response: HttpResponse) -> HttpResponse:
    # The page's address is the key: keep it out of shared caches.
    response["Cache-Control"] = "no-store"
    return response


def _page(
    request: HttpRequest,
    invitation: Invitation,
    key: str,
    *,
    form: SignupForm | None = None,
    error: str | None = None,
    status: int = 200,
) -> HttpResponse:
    """The invitation page: why it cannot be used, or how to accept it."""
    study = invitation.study
    refusal = invitations.invitation_refusal(invitation)
    if refusal is None:
        refusal = services.phase_refusal(study, services.Action.JOIN_AS_EXPERT)
    already = (
        request.user.is_authenticated and refusal is None and selectors.is_expert_of(study=study, user=request.user)
    )
    if not request.user.is_authenticated and refusal is None and form is None:
        form = SignupForm()
    context = {
        "invitation": invitation,
        "study": study,
        "refusal": refusal,
        "already": already,
        "form": form,
        "error": error,
        "key": key,
        "login_url": f"{reverse('login')}?{urlencode({'next': request.path})}",
    }
    if refusal:
        status = 410  # gone: used, revoked, expired, or the study moved on
    return _no_store(render(request, "invitations/invitation.html", context, status=status))


def _confirmation_send(request: HttpRequest, user: User) -> None:
    """Mail the newcomer's address its confirmation link; say so."""
    confirm = reverse("account_email_confirm", args=[services.email_confirmation_token(user=user)])
    refused = services.email_change_notify(
        user=user,
        old="",
        account_link=request.build_absolute_uri(reverse("account_email")),
        confirm_link=request.build_absolute_uri(confirm),
    )
    if refused is None:
        messages.info(request, f"A message with a link to confirm {user.email} was sent there.")
    else:
        messages.warning(
            request,
            f"The mail server refused the message to {user.email} ({refused}): check the address under Account.",
        )


@require_http_methods(["GET", "POST"])
def invitation_page(request: HttpRequest, key: str) -> HttpResponse:
    invitation = invitations.invitation_get_by_key(key=key)
    if invitation is None:
        return _unknown(request)
    if request.method == "GET":
        return _page(request, invitation, key)
    if request.user.is_authenticated:
        try:
            invitations.invitation_accept_link(key=key, user=request.user)
        except ServiceError as refused:
            message = "; ".join(sum(refused.errors.values(), [])) if isinstance(refused, InvalidInput) else str(refused)
            return _page(request, invitation, key, error=message, status=409)
        messages.success(request, f"You joined “{invitation.study.title}” as an expert.")
        return redirect(study_home(invitation.study))
    form = SignupForm(request.POST)
    if form.is_valid():
        try:
            membership = invitations.invitation_accept_with_signup(
                key=key,
                username=form.cleaned_data["username"],
                password=form.cleaned_data["password1"],
                email=form.cleaned_data["email"],
            )
        except InvalidInput as error:
            form_add_service_errors(
                form,
                InvalidInput(
                    {"password1" if field == "password" else field: msgs for field, msgs in error.errors.items()}
                ),
            )
        except ServiceError as error:
            form.add_error(None, str(error))
        else:
            login(request, membership.user, backend="django.contrib.auth.backends.ModelBackend")
            messages.success(
                request,
                f"Welcome, {membership.user.get_username()}: you joined “{invitation.study.title}” as an expert.",
            )
            if membership.user.email:
                _confirmation_send(request, membership.user)
            return redirect(study_home(invitation.study))
    return _page(request, invitation, key, form=form)


@require_http_methods(["GET", "POST"])
def invitation_decline_page(request: HttpRequest, key: str) -> HttpResponse:
    """Decline a link (logged in): GET asks, POST declines; the link then
    stops working for everyone."""
    invitation = invitations.invitation_get_by_key(key=key)
    if invitation is None:
        return _unknown(request)
    if not request.user.is_authenticated:
        return redirect(f"/invitations/{key}/")
    refusal = invitations.invitation_refusal(invitation)
    if request.method == "POST" and refusal is None:
        try:
            invitations.invitation_decline(invitation=invitation)
        except ServiceError as error:
            refusal = str(error)
        else:
            messages.info(request, f"You declined the invitation to “{invitation.study.title}”.")
            return redirect("home")
    context = {"invitation": invitation, "study": invitation.study, "refusal": refusal, "key": key}
    return _no_store(render(request, "invitations/decline.html", context, status=410 if refusal else 200))
