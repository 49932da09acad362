"""Single sign-on against a real OpenID Connect provider (panva's
oidc-provider, tests/oidc/provider.js) that the tests start: authorization
code + PKCE, the accounts it makes or links, and every refusal with its
message on the sign-in page. Skipped only without node and without CI."""

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from accounts import oidc
from accounts.models import OidcIdentity
from workspace.models import EmailConfirmation

HERE = Path(__file__).resolve().parents[1] / "oidc"
SITE = "http://testserver"

pytestmark = pytest.mark.django_db


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def provider() -> Iterator[str]:
    reason = ""
    if shutil.which("node") is None:
        reason = "Node.js (node) is not installed"
    elif not (HERE / "node_modules" / "oidc-provider").exists():
        reason = "tests/oidc/node_modules is missing: run `npm ci --ignore-scripts` in tests/oidc"
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI is set, so the single sign-on tests may not be skipped", pytrace=False)
        pytest.skip(f"{reason} (these tests fail instead when CI is set)")
    port = _free_port()
    process = subprocess.Popen(
        ["node", str(HERE / "provider.js"), "--port", str(port), "--redirect", SITE],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    issuer = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            pytest.fail("the OpenID Connect provider did not start")
        yield issuer
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture
def sso(settings: object, provider: str) -> str:
    settings.OIDC_ISSUER = provider  # type: ignore[attr-defined]
    settings.OIDC_PROVIDER_NAME = "Test IdP"  # type: ignore[attr-defined]
    settings.OIDC_RP_CLIENT_ID = "approve"  # type: ignore[attr-defined]
    settings.OIDC_RP_CLIENT_SECRET = "approve-secret"  # type: ignore[attr-defined]
    settings.OIDC_RP_SCOPES = "openid email profile groups"  # type: ignore[attr-defined]
    settings.OIDC_ALLOWED_DOMAINS = ["allowed.example"]  # type: ignore[attr-defined]
    settings.OIDC_ALLOWED_GROUPS = ["approve-users"]  # type: ignore[attr-defined]
    oidc.discovery_forget()
    return provider


def _provider_login(authorize_url: str, account: str) -> str:
    """Signs in at the provider's own pages as ``account`` and consents;
    the callback URL (ours) it sends the browser to."""
    with httpx.Client(timeout=10) as browser:
        url = authorize_url
        for _ in range(12):
            response = browser.get(url) if not url.startswith(SITE) else None
            if response is None:
                return url
            if response.status_code in (302, 303):
                url = str(response.url.join(response.headers["location"]))
                continue
            assert response.status_code == 200, response.text
            form = {"prompt": "consent"} if 'value="consent"' in response.text else {}
            form = form or {"prompt": "login", "login": account, "password": "any"}
            response = browser.post(url, data=form)
            assert response.status_code in (302, 303), response.text
            url = str(response.url.join(response.headers["location"]))
    raise AssertionError("the provider never sent the browser back")


def _start(client: Client, next_url: str = "") -> str:
    response = client.get("/accounts/oidc/login/" + (f"?next={next_url}" if next_url else ""))
    assert response.status_code == 302
    location = response["Location"]
    query = parse_qs(urlparse(location).query)
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) >= 43
    assert query["state"][0] and query["nonce"][0] and query["response_type"] == ["code"]
    return location


def _sign_in(client: Client, account: str) -> tuple[object, str]:
    callback = _provider_login(_start(client), account)
    assert callback.startswith(f"{SITE}/accounts/oidc/callback/?")
    return client.get(callback.removeprefix(SITE)), callback


def _login_page_text(client: Client) -> str:
    return client.get("/accounts/login/").content.decode()


def test_new_account_from_an_allowed_domain_then_signed_in_by_its_link(client: Client, sso: str) -> None:
    response, _ = _sign_in(client, "alice")
    assert response.status_code == 302 and response["Location"] == "/"
    user = User.objects.get(username="alice")
    assert (user.email, user.first_name, user.last_name) == ("alice@allowed.example", "Alice", "Example")
    assert not user.has_usable_password()
    assert EmailConfirmation.objects.get(user=user).email == "alice@allowed.example"
    assert OidcIdentity.objects.get(user=user).subject == "alice"
    assert int(client.session["_auth_user_id"]) == user.pk
    client.logout()
    other = Client()
    _sign_in(other, "alice")
    assert int(other.session["_auth_user_id"]) == user.pk
    assert User.objects.filter(email="alice@allowed.example").count() == 1


def test_new_account_by_an_allowed_group(client: Client, sso: str) -> None:
    _sign_in(client, "grouped")
    user = User.objects.get(username="gus")
    assert (user.first_name, user.last_name, user.email) == ("Gus", "Grouped", "gus@elsewhere.example")


def test_username_taken_by_a_look_alike_gets_a_free_one(client: Client, sso: str) -> None:
    User.objects.create_user(username="Alice", email="someone@else.example")
    _sign_in(client, "alice")
    assert OidcIdentity.objects.get(subject="alice").user.username == "alice-2"


@pytest.mark.parametrize(
    ("account", "message"),
    [
        ("outsider", "new accounts through single sign-on are open only to some"),
        ("unverified", "Your identity provider has not verified your e-mail address (unverified@allowed.example)"),
        ("wrongaud", "was meant for another application (wrong audience)"),
        ("expired", "had expired (its ID token is out of date)"),
    ],
)
def test_refused_with_a_message_on_the_sign_in_page(client: Client, sso: str, account: str, message: str) -> None:
    before = User.objects.count()
    response, _ = _sign_in(client, account)
    assert response.status_code == 302 and response["Location"] == "/accounts/login/"
    assert "_auth_user_id" not in client.session
    assert message in _login_page_text(client)
    assert User.objects.count() == before and not OidcIdentity.objects.exists()


def test_a_replayed_callback_is_refused(client: Client, sso: str) -> None:
    response, callback = _sign_in(client, "alice")
    assert response["Location"] == "/"
    client.logout()
    replay = client.get(callback.removeprefix(SITE))
    assert replay.status_code == 302 and replay["Location"] == "/accounts/login/"
    assert "_auth_user_id" not in client.session
    assert "unknown or was already used" in _login_page_text(client)
    # In another browser (no state in its session) too.
    stranger = Client()
    assert stranger.get(callback.removeprefix(SITE))["Location"] == "/accounts/login/"
    assert "_auth_user_id" not in stranger.session


def test_links_an_existing_account_by_its_confirmed_address(client: Client, sso: str) -> None:
    carol = User.objects.create_user(username="carol", email="carol@allowed.example", password="pw-carol-123")
    EmailConfirmation.objects.create(user=carol, email="Carol@allowed.example", confirmed_at=timezone.now())
    _sign_in(client, "carol")
    assert int(client.session["_auth_user_id"]) == carol.pk
    assert OidcIdentity.objects.get(subject="carol").user == carol
    assert not User.objects.filter(username="carol-idp").exists()


def test_no_link_to_an_account_whose_address_is_unconfirmed(client: Client, sso: str) -> None:
    dave = User.objects.create_user(username="dave", email="dave@allowed.example", password="pw-dave-123")
    EmailConfirmation.objects.create(user=dave, email="old-dave@allowed.example", confirmed_at=timezone.now())
    response, _ = _sign_in(client, "dave")
    assert response["Location"] == "/accounts/login/"
    assert "_auth_user_id" not in client.session
    assert "has not confirmed it" in _login_page_text(client)
    assert not OidcIdentity.objects.exists() and not User.objects.filter(username="dave-idp").exists()


def test_logout_ends_the_provider_session_too(client: Client, sso: str) -> None:
    _sign_in(client, "alice")
    id_token = client.session["oidc_id_token"]
    response = client.post("/accounts/logout/")
    assert response.status_code == 302
    target = urlparse(response["Location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == f"{sso}/session/end"
    query = parse_qs(target.query)
    assert query["id_token_hint"] == [id_token] and query["client_id"] == ["approve"]
    assert query["post_logout_redirect_uri"] == [f"{SITE}/accounts/login/"]
    assert "_auth_user_id" not in client.session
    end_session = httpx.get(response["Location"], timeout=10)
    assert end_session.status_code == 200 and 'name="logout"' in end_session.text


def test_next_is_kept_only_on_this_site(client: Client, sso: str) -> None:
    client.get("/accounts/oidc/login/?next=https://evil.example/steal")
    assert client.session["oidc_login_next"] is None
    callback = _provider_login(_start(client, "/studies/"), "alice")
    assert client.get(callback.removeprefix(SITE))["Location"] == "/studies/"


def test_the_sign_in_page_shows_the_button(client: Client, sso: str) -> None:
    page = _login_page_text(client)
    assert "Sign in with Test IdP" in page and 'name="password"' in page


def test_password_sign_in_turned_off(client: Client, sso: str, settings: object) -> None:
    settings.PASSWORD_SIGN_IN = False  # type: ignore[attr-defined]
    User.objects.create_user(username="erin", password="pw-erin-123")
    page = _login_page_text(client)
    assert "Sign in with Test IdP" in page and 'name="password"' not in page and "Forgot your password" not in page
    refused = client.post("/accounts/login/", {"username": "erin", "password": "pw-erin-123"})
    assert refused.status_code == 403 and "Password sign-in is turned off" in refused.content.decode()
    assert "_auth_user_id" not in client.session
    assert client.get("/accounts/password/reset/").status_code == 404


def test_off_without_an_issuer(client: Client, settings: object) -> None:
    settings.OIDC_ISSUER = ""  # type: ignore[attr-defined]
    assert client.get("/accounts/oidc/login/").status_code == 404
    assert client.get("/accounts/oidc/callback/?code=x&state=y").status_code == 404
    page = _login_page_text(client)
    assert "Sign in with" not in page and 'name="password"' in page


def test_no_second_link_by_address_for_an_account_linked_to_another_subject(client: Client, sso: str) -> None:
    carol = User.objects.create_user(username="carol", email="carol@allowed.example", password="pw-carol-123")
    EmailConfirmation.objects.create(user=carol, email="carol@allowed.example", confirmed_at=timezone.now())
    OidcIdentity.objects.create(user=carol, issuer=sso, subject="the-old-carol")
    response, _ = _sign_in(client, "carol")
    assert response["Location"] == "/accounts/login/" and "_auth_user_id" not in client.session
    assert "linked to another identity at this provider" in _login_page_text(client)
    assert list(OidcIdentity.objects.values_list("subject", flat=True)) == ["the-old-carol"]


def test_an_invitation_to_the_verified_address_lets_an_outsider_in_and_waits_for_them(client: Client, sso: str) -> None:
    """olga's domain may not create accounts, but a designer invited her
    address: her first sign-in creates the account, and the invitation is
    on her list to accept (no link needed: the provider verified it)."""
    from workspace import invitations
    from workspace.services import study_create

    designer = User.objects.create_user(username="designer", email="designer@allowed.example")
    study = study_create(designer=designer, title="Triage model")
    invitation, _ = invitations.invitation_create(study=study, created_by=designer, email="Olga@Elsewhere.example")
    response, _ = _sign_in(client, "outsider")
    assert response["Location"] == "/"
    olga = User.objects.get(username="olga")
    assert [i.pk for i in invitations.invitation_list_for_user(user=olga)] == [invitation.pk]
    assert "Triage model" in client.get("/").content.decode()
    invitation.status = "revoked"
    invitation.save()
    client.logout()
    olga.delete()
    refused, _ = _sign_in(Client(), "outsider")  # revoked: the domain rule applies again
    assert refused["Location"] == "/accounts/login/" and not User.objects.filter(username="olga").exists()
