"""Account pages: log-in with its lock-out, password change and reset, API tokens."""

import logging
from typing import Any

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm, PasswordChangeForm, PasswordResetForm, SetPasswordForm
from django.contrib.auth.views import (
    INTERNAL_RESET_SESSION_TOKEN,
    LoginView,
    PasswordChangeView,
    PasswordResetCompleteView,
    PasswordResetConfirmView,
    PasswordResetDoneView,
    PasswordResetView,
)
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse, reverse_lazy
from django.utils import timezone
from django.views.decorators.http import require_http_methods

from .. import limits, lockout, mail, selectors, services
from ..errors import InvalidInput
from ..forms.designer import EMAIL_MAX_LENGTH
from ..models import ApiToken
from .common import form_add_service_errors, signed_in_user

logger = logging.getLogger(__name__)

# --- Log-in and its lock-out ---------------------------------------------------------


class ThrottledLoginView(LoginView):
    """Django's login page with the lock-out against password guessing
    (``workspace.lockout``: per address and per (address, username), the
    username read as Django's authentication reads it). The API's token
    endpoint counts against the same lock-out."""

    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def attempted_username(self) -> str:
        return self.request.POST.get("username", "")

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        message = lockout.login_refusal(request, self.attempted_username())
        if message is not None:
            form = self.get_form()
            form.add_error(None, message)
            return self.render_to_response(self.get_context_data(form=form), status=429)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        lockout.login_failed(self.request, self.attempted_username())
        return super().form_invalid(form)

    def form_valid(self, form: AuthenticationForm) -> HttpResponse:
        lockout.login_succeeded(self.request, self.attempted_username())
        return super().form_valid(form)


# --- Passwords -----------------------------------------------------------------------


class PasswordChangePage(PasswordChangeView):
    """Change my password; this revokes my API tokens and ends my other
    sessions, and keeps me logged in here."""

    template_name = "accounts/password_change.html"
    success_url = reverse_lazy("password_change")

    def form_valid(self, form: PasswordChangeForm) -> HttpResponse:
        revoked = services.user_password_set(user=form.user, password=form.cleaned_data["new_password1"])
        update_session_auth_hash(self.request, form.user)
        note = f" Your {revoked} API token{'s were' if revoked != 1 else ' was'} revoked." if revoked else ""
        messages.success(self.request, f"Your password was changed.{note}")
        return HttpResponseRedirect(self.get_success_url())


class PasswordResetPage(PasswordResetView):
    """Ask for a reset link by e-mail. The answer, and the work behind it,
    are the same whether or not an account has that address, and whether or
    not a limit was reached: the request counts the throttle and enqueues the
    mail (``workspace.mail``), after its transaction commits; a worker looks
    the account up and sends it (at once, in-process, without a broker)."""

    template_name = "accounts/password_reset_form.html"

    def form_valid(self, form: PasswordResetForm) -> HttpResponse:
        email = form.cleaned_data["email"]
        if mail.password_reset_allowed(request=self.request, email=email):
            domain, use_https = self.request.get_host(), self.request.is_secure()
            transaction.on_commit(lambda: _password_reset_enqueue(email=email, domain=domain, use_https=use_https))
        return HttpResponseRedirect(self.get_success_url())


def _password_reset_enqueue(*, email: str, domain: str, use_https: bool) -> None:
    try:
        mail.password_reset_mail_send.delay(email=email, domain=domain, use_https=use_https)
    except Exception as error:  # the broker is down: the person asks again, the page must not fail
        logger.warning("password reset not enqueued: %s: %s", type(error).__name__, error)


class PasswordResetDonePage(PasswordResetDoneView):
    template_name = "accounts/password_reset_done.html"

    def get_context_data(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().get_context_data(**kwargs), "valid_hours": max(1, settings.PASSWORD_RESET_TIMEOUT // 3600)}


class PasswordResetConfirmPage(PasswordResetConfirmView):
    """The link from the e-mail: choose a new password, which revokes every
    API token of the account."""

    template_name = "accounts/password_reset_confirm.html"

    def form_valid(self, form: SetPasswordForm) -> HttpResponse:
        services.user_password_set(user=form.user, password=form.cleaned_data["new_password1"])
        # The link works once (Django's reset views keep its token here).
        del self.request.session[INTERNAL_RESET_SESSION_TOKEN]
        return HttpResponseRedirect(self.get_success_url())


class PasswordResetCompletePage(PasswordResetCompleteView):
    template_name = "accounts/password_reset_complete.html"


# --- E-mail address -----------------------------------------------------------------


class EmailForm(forms.Form):
    email = forms.EmailField(
        label="E-mail address",
        required=False,
        max_length=EMAIL_MAX_LENGTH,
        help_text="Reminders and password resets go here; without it the designer cannot reach you. Empty removes it.",
        widget=forms.EmailInput(attrs={"autocomplete": "email"}),
    )


@login_required
@require_http_methods(["GET", "POST"])
def email_page(request: HttpRequest) -> HttpResponse:
    """My e-mail address: change or remove it; the new address (and the old
    one) get a message through the configured mail backend."""
    user = signed_in_user(request)
    form = EmailForm(request.POST if request.method == "POST" else None, initial={"email": user.email})
    if form.is_bound and form.is_valid():
        old = user.email
        try:
            new = services.user_email_set(user=user, email=form.cleaned_data["email"])
        except InvalidInput as error:
            form_add_service_errors(form, error)
        else:
            if new == old:
                messages.info(request, "Nothing changed: that is already your e-mail address.")
                return redirect("account_email")
            confirm = reverse("account_email_confirm", args=[services.email_confirmation_token(user=user)])
            refused = services.email_change_notify(
                user=user,
                old=old,
                account_link=request.build_absolute_uri(reverse("account_email")),
                confirm_link=request.build_absolute_uri(confirm) if new else "",
            )
            if not new:
                messages.success(
                    request, "Your e-mail address was removed: reminders and password resets cannot reach you."
                )
            elif refused is None:
                messages.success(
                    request,
                    f"Your e-mail address is now {new}. A message with a confirmation link was sent there: "
                    "open it to confirm the address; if it does not arrive, check the address.",
                )
            else:
                messages.warning(
                    request,
                    f"Your e-mail address is now {new}, but the mail server refused the message to it ({refused}): "
                    "check the address.",
                )
            return redirect("account_email")
    confirmation = selectors.email_confirmation_get(user=user)
    confirmed = confirmation if confirmation is not None and confirmation.email == user.email else None
    return render(request, "accounts/email.html", {"form": form, "confirmed": confirmed})


@login_required
@require_http_methods(["GET"])
def email_confirm_page(request: HttpRequest, token: str) -> HttpResponse:
    """The link mailed to a new address: following it (signed in as the
    account's owner) confirms that the address reaches them."""
    user = signed_in_user(request)
    try:
        services.email_confirm(user=user, token=token)
    except InvalidInput as error:
        messages.error(request, "; ".join(sum(error.errors.values(), [])).capitalize() + ".")
    else:
        messages.success(request, f"Your e-mail address {user.email} is confirmed: reminders reach you there.")
    return redirect("account_email")


# --- API tokens ----------------------------------------------------------------------


class TokenForm(forms.Form):
    name = forms.CharField(
        label="Name",
        max_length=limits.NAME_MAX_LENGTH,
        required=False,
        help_text="To tell your tokens apart, e.g. “laptop” or “CI”.",
    )
    expires_in_days = forms.IntegerField(label="Lifetime in days", required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        longest = settings.API_TOKEN_MAX_LIFETIME_DAYS
        field = self.fields["expires_in_days"]
        field.help_text = f"Empty for {settings.API_TOKEN_LIFETIME_DAYS} days; at most {longest}."
        # Browsers hint at the bounds; the service enforces them.
        field.widget.attrs.update({"min": 1, "max": longest, "placeholder": str(settings.API_TOKEN_LIFETIME_DAYS)})
        self.fields["name"].widget.attrs.update({"autocomplete": "off"})


@login_required
@require_http_methods(["GET", "POST"])
def tokens_page(request: HttpRequest) -> HttpResponse:
    """My API tokens: create one (its key is shown on this answer only), list
    them, and a link to revoke each."""
    form = TokenForm(request.POST if request.method == "POST" else None)
    created = None
    if form.is_bound and form.is_valid():
        try:
            created = services.api_token_create(
                user=signed_in_user(request),
                name=form.cleaned_data["name"],
                expires_in_days=form.cleaned_data["expires_in_days"],
            )
        except InvalidInput as error:
            form_add_service_errors(form, error)
        else:
            form = TokenForm()
    context = {
        "form": form,
        "tokens": selectors.api_token_list(user=request.user),
        "created": created,
        "now": timezone.now(),
    }
    response = render(request, "accounts/tokens.html", context)
    if created is not None:
        # The key must not linger in a cache or the browser's history.
        response["Cache-Control"] = "no-store"
    return response


@login_required
@require_http_methods(["GET", "POST"])
def token_revoke_page(request: HttpRequest, token_id: int) -> HttpResponse:
    """Revoke one of my tokens: GET asks for confirmation, POST revokes."""
    try:
        token = selectors.api_token_get(user=request.user, token_id=token_id)
    except ApiToken.DoesNotExist:
        raise Http404("No such token.") from None
    if request.method == "POST":
        services.api_token_revoke(token=token)
        label = f"“{token.name}” ({token.prefix}…)" if token.name else f"{token.prefix}…"
        messages.success(request, f"The token {label} was revoked.")
        return redirect("api_tokens")
    return render(request, "accounts/token_revoke.html", {"token": token})
