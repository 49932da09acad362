"""The two-factor pages: set it up (and its state once on), the code page
after signing in, new recovery codes, turning it off."""

from typing import cast

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods

from workspace.errors import InvalidInput
from workspace.views.common import form_add_service_errors

from . import services
from .forms import ConfirmForm, SetupForm, VerifyForm
from .qr import qr_svg


def _user(request: HttpRequest) -> User:
    return cast(User, request.user)


def _next(request: HttpRequest) -> str:
    """Where to go once done: ``next`` when it is a path of this site."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return reverse("home")


def _codes_page(request: HttpRequest, codes: list[str], *, first: bool) -> HttpResponse:
    response = render(
        request, "accounts/two_factor/codes.html", {"codes": codes, "first": first, "next": _next(request)}
    )
    # The codes must not linger in a cache or the browser's history.
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_http_methods(["GET", "POST"])
def two_factor_page(request: HttpRequest) -> HttpResponse:
    """Two-factor sign-in: on, with its recovery codes and how to turn it
    off; or off, with the QR code and secret to set it up, confirmed by a
    code from the app (then the recovery codes, shown once)."""
    user = _user(request)
    if services.is_enabled(user):
        if request.method == "POST":
            return redirect("two_factor")
        context: dict[str, object] = {
            "since": services.enabled_since(user=user),
            "codes_left": services.recovery_codes_left(user=user),
            "required": services.is_required(user),
        }
        return render(request, "accounts/two_factor/on.html", context)
    key = services.setup_key(request.session)
    form = SetupForm(request.POST if request.method == "POST" else None)
    if form.is_bound and form.is_valid():
        try:
            enabled = services.two_factor_enable(user=user, key=key, code=form.cleaned_data["code"])
        except InvalidInput as error:
            form_add_service_errors(form, error)
        else:
            request.session.pop(services.SESSION_SETUP_KEY, None)
            services.session_verified(request, enabled.device)
            return _codes_page(request, enabled.recovery_codes, first=True)
    setup: dict[str, object] = {
        "form": form,
        "qr": qr_svg(services.setup_uri(user, key)),
        "secret": services.secret_text(key),
        "required": services.session_state(request, user) == services.SETUP,
        "next": request.POST.get("next") or request.GET.get("next", ""),
    }
    response = render(request, "accounts/two_factor/setup.html", setup)
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_http_methods(["GET", "POST"])
def verify_page(request: HttpRequest) -> HttpResponse:
    """After the password: a code from the app or a recovery code. Wrong
    codes count towards the lock-out; a TOTP code works once."""
    user = _user(request)
    state = services.session_state(request, user, fresh=request.method == "GET")
    is_verified = getattr(user, "is_verified", None)
    if state == services.FREE or (is_verified is not None and is_verified()):
        return HttpResponseRedirect(_next(request))
    if state == services.SETUP:
        return redirect("two_factor")
    form = VerifyForm(request.POST if request.method == "POST" else None)
    status = 200
    if form.is_bound and form.is_valid():
        try:
            device = services.code_verify(request=request, user=user, code=form.cleaned_data["code"])
        except services.CodeRefused as refused:
            form.add_error("code", refused.message)
            status = 429 if refused.locked else 200
        else:
            services.session_verified(request, device)
            if device.name == services.RECOVERY_NAME:
                left = services.recovery_codes_left(user=user)
                messages.warning(
                    request,
                    f"You signed in with a recovery code: it will not work again. {left} left; "
                    "make new ones on the two-factor page if you are running short.",
                )
            return HttpResponseRedirect(_next(request))
    context = {"form": form, "next": request.POST.get("next") or request.GET.get("next", "")}
    return render(request, "accounts/two_factor/verify.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def recovery_codes_page(request: HttpRequest) -> HttpResponse:
    """New recovery codes (the old ones stop working), confirmed by a code or
    the password."""
    user = _user(request)
    if not services.is_enabled(user):
        return redirect("two_factor")
    form = ConfirmForm(request.POST if request.method == "POST" else None)
    if form.is_bound and form.is_valid():
        try:
            services.confirm_with_code_or_password(
                request=request, user=user, code=form.cleaned_data["code"], password=form.cleaned_data["password"]
            )
        except InvalidInput as error:
            form_add_service_errors(form, error)
        else:
            return _codes_page(request, services.recovery_codes_replace(user=user), first=False)
    return render(request, "accounts/two_factor/confirm.html", {"form": form, "action": "codes"})


@login_required
@require_http_methods(["GET", "POST"])
def disable_page(request: HttpRequest) -> HttpResponse:
    """Turn two-factor sign-in off, confirmed by a code or the password;
    refused when the account must use it."""
    user = _user(request)
    if not services.is_enabled(user):
        return redirect("two_factor")
    required = services.is_required(user)
    form = ConfirmForm(request.POST if request.method == "POST" and not required else None)
    if request.method == "POST" and required:
        messages.error(request, "Your account must use two-factor sign-in: it cannot be turned off.")
        return redirect("two_factor")
    if form.is_bound and form.is_valid():
        try:
            services.two_factor_disable(
                request=request, user=user, code=form.cleaned_data["code"], password=form.cleaned_data["password"]
            )
        except InvalidInput as error:
            form_add_service_errors(form, error)
        else:
            messages.success(request, "Two-factor sign-in is off: your password alone signs you in.")
            return redirect("two_factor")
    return render(request, "accounts/two_factor/confirm.html", {"form": form, "action": "off", "required": required})
