"""The self sign-up pages (docs/accounts.md "Self sign-up"): ask for the
link with an e-mail address (``/accounts/signup/``), then, from the mailed
link, choose a username and password (``/accounts/signup/<token>/``)."""

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login, password_validation
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from workspace.errors import InvalidInput, RateLimited
from workspace.limits import USERNAME_MAX_LENGTH
from workspace.views.common import form_add_service_errors

from . import signup
from .models import SitePolicy

PASSWORD_BACKEND = "django.contrib.auth.backends.ModelBackend"


class SignUpForm(forms.Form):
    # A CharField: the service checks the address and names ``email``.
    email = forms.CharField(
        label="E-mail address",
        max_length=254,
        widget=forms.EmailInput(attrs={"autocomplete": "email", "autocapitalize": "none", "autofocus": True}),
    )


class SignUpCompleteForm(forms.Form):
    username = forms.CharField(
        label="Username",
        max_length=USERNAME_MAX_LENGTH,
        help_text="Letters, digits and @ . + - _ only. Others in your studies see it.",
        widget=forms.TextInput(attrs={"autocomplete": "username", "autocapitalize": "none", "autofocus": True}),
    )
    name = forms.CharField(
        label="Your name",
        max_length=signup.NAME_MAX_LENGTH,
        required=False,
        help_text="How the pages name you to others, e.g. Ada Lovelace.",
        widget=forms.TextInput(attrs={"autocomplete": "name"}),
    )
    password = forms.CharField(
        label="Password", strip=False, widget=forms.PasswordInput(attrs={"autocomplete": "new-password"})
    )
    password_again = forms.CharField(
        label="Password again", strip=False, widget=forms.PasswordInput(attrs={"autocomplete": "new-password"})
    )

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.fields["password"].help_text = " ".join(password_validation.password_validators_help_texts())

    def clean(self) -> dict[str, object]:
        data = super().clean() or {}
        if data.get("password") and data.get("password_again") and data["password"] != data["password_again"]:
            self.add_error("password_again", "the two passwords differ: type the same one twice")
        return data


def _site(request: HttpRequest) -> str:
    return request.build_absolute_uri("/").rstrip("/")


def _closed(request: HttpRequest, refusal: signup.SignUpClosed, status: int = 200) -> HttpResponse:
    return render(request, "accounts/signup_closed.html", {"message": refusal.message}, status=status)


@require_http_methods(["GET", "POST"])
def signup_page(request: HttpRequest) -> HttpResponse:
    """Step 1: an e-mail address. The answer to a well-formed, allowed
    address is the same whether or not an account has it."""
    if request.user.is_authenticated:
        messages.info(request, "You are signed in already; sign out first to create another account.")
        return redirect("home")
    policy = SitePolicy.current()
    refusal = signup.policy_refusal(policy)
    if refusal is not None:
        return _closed(request, refusal, status=403 if request.method == "POST" else 200)
    form = SignUpForm(request.POST if request.method == "POST" else None)
    status = 200
    if form.is_bound and form.is_valid():
        try:
            email = signup.signup_request(request=request, email=form.cleaned_data["email"], site=_site(request))
        except InvalidInput as error:
            form_add_service_errors(form, error)
            status = 400
        except RateLimited as error:
            form.add_error(None, str(error))
            status = 429
        except signup.SignUpClosed as closed:
            return _closed(request, closed, status=403)
        else:
            return render(
                request, "accounts/signup_sent.html", {"email": email, "sent": signup.SENT, "hours": _hours()}
            )
    elif form.is_bound:
        status = 400
    domains = policy.domains() if policy.signup == SitePolicy.SignUp.DOMAINS else []
    return render(request, "accounts/signup.html", {"form": form, "domains": domains}, status=status)


def _hours() -> int:
    return int(settings.SIGNUP_LINK_HOURS)


def _link_invalid(request: HttpRequest, error: InvalidInput) -> HttpResponse:
    message = " ".join(str(message) for message in error.errors["token"])
    return render(request, "accounts/signup_link_invalid.html", {"message": message}, status=400)


@require_http_methods(["GET", "POST"])
def signup_complete_page(request: HttpRequest, token: str) -> HttpResponse:
    """Step 2, the mailed link: choose a username and a password; the
    account is created with its address confirmed, and signed in."""
    if request.user.is_authenticated:
        messages.info(request, "You are signed in already; sign out first to create another account.")
        return redirect("home")
    refusal = signup.policy_refusal(SitePolicy.current())
    if refusal is not None:
        return _closed(request, refusal, status=403)
    try:
        pending = signup.signup_request_get(token=token)
    except InvalidInput as error:
        return _link_invalid(request, error)
    form = SignUpCompleteForm(request.POST if request.method == "POST" else None)
    status = 200
    if form.is_bound and form.is_valid():
        try:
            signup.throttle_client(request)
            user = signup.signup_complete(
                token=token,
                username=form.cleaned_data["username"],
                password=form.cleaned_data["password"],
                name=form.cleaned_data["name"],
            )
        except InvalidInput as error:
            if "token" in error.errors:
                return _link_invalid(request, error)
            form_add_service_errors(form, error)
            status = 400
        except RateLimited as error:
            form.add_error(None, str(error))
            status = 429
        except signup.SignUpClosed as closed:
            return _closed(request, closed, status=403)
        else:
            login(request, user, backend=PASSWORD_BACKEND)
            messages.success(
                request, f"Welcome, {user.get_username()}: your account is ready, its address {user.email} confirmed."
            )
            return redirect("home")
    elif form.is_bound:
        status = 400
    return render(request, "accounts/signup_complete.html", {"form": form, "email": pending.email}, status=status)
