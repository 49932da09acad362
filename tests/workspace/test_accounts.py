"""Accounts: password change and reset (both revoke API tokens), expiring API
tokens (API and the tokens page), the log-in lock-out per (address, username)
with a per-address ceiling, and the e-mail settings."""

import re
from datetime import timedelta
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.core.exceptions import ImproperlyConfigured
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from approve_site.settings import email_from_url
from tests.fixtures import PASSWORD, api_error, error_fields
from workspace import services
from workspace.models import ApiToken

API = "/api/v1"
NEW_PASSWORD = "another-long-password-83"


def token_client(key):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def field_error_ids(body, field):
    """The field's input refers to its error list, which exists and is not empty."""
    widget = re.search(rf'<input[^>]*name="{field}"[^>]*>', body).group(0)
    assert 'aria-invalid="true"' in widget, widget
    described = re.search(r'aria-describedby="([^"]*)"', widget).group(1).split()
    assert f"id_{field}_error" in described, widget
    errors = re.search(rf'<ul class="field__errors" id="id_{field}_error">(.*?)</ul>', body, re.S).group(1)
    return re.findall(r"<li>(.*?)</li>", errors, re.S)


def labels_every_field(body):
    """Every visible input, select and textarea has a <label for> (or is the
    CSRF token)."""
    ids = re.findall(r'<(?:input|select|textarea)(?![^>]*type="hidden")[^>]*\bid="([^"]+)"', body)
    labelled = set(re.findall(r'<label[^>]*for="([^"]+)"', body))
    unlabelled = [i for i in ids if i not in labelled]
    assert ids and not unlabelled, unlabelled


# --- password change ----------------------------------------------------------------


def test_password_page_needs_login_and_labels_every_field(client, cast):
    anonymous = client.get(reverse("password_change"))
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))
    client.force_login(cast.alice)
    response = client.get("/accounts/password/")
    assert response.status_code == 200
    body = response.content.decode()
    for name in ("old_password", "new_password1", "new_password2"):
        assert f'name="{name}"' in body
    labels_every_field(body)


def test_password_change_revokes_tokens_keeps_this_session_and_ends_others(cast):
    services.api_token_create(user=cast.alice, name="laptop")
    _, key = services.api_token_create(user=cast.alice, name="ci")
    _, bobs_key = services.api_token_create(user=cast.bob, name="bob's")
    assert token_client(key).get(API + "/auth/tokens/").status_code == 200
    here, elsewhere = Client(), Client()
    here.force_login(cast.alice)
    elsewhere.force_login(cast.alice)

    response = here.post(
        reverse("password_change"),
        {"old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
        follow=True,
    )
    assert response.redirect_chain == [(reverse("password_change"), 302)]
    assert "Your password was changed. Your 2 API tokens were revoked." in response.content.decode()
    cast.alice.refresh_from_db()
    assert cast.alice.check_password(NEW_PASSWORD)
    assert not ApiToken.objects.filter(user=cast.alice).exists()
    assert ApiToken.objects.filter(user=cast.bob).count() == 1  # nobody else's
    refused = token_client(key).get(API + "/auth/tokens/")
    assert refused.status_code == 401 and refused.json() == api_error(
        "authentication_failed", "Invalid or revoked token."
    )
    assert token_client(bobs_key).get(API + "/auth/tokens/").status_code == 200
    # This session stays; the other one ends with the old password.
    assert here.get(reverse("home")).status_code == 200
    assert elsewhere.get(reverse("home")).status_code == 302


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        (
            {"old_password": "wrong", "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD},
            "old_password",
            "Your old password was entered incorrectly",
        ),
        (
            {"old_password": PASSWORD, "new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD + "x"},
            "new_password2",
            "The two password fields didn’t match.",
        ),
        (
            {"old_password": PASSWORD, "new_password1": "12345678", "new_password2": "12345678"},
            "new_password2",
            "This password is entirely numeric.",
        ),
        (
            {"old_password": PASSWORD, "new_password1": "", "new_password2": ""},
            "new_password1",
            "This field is required.",
        ),
    ],
)
def test_password_change_errors_name_the_field_and_change_nothing(client, cast, data, field, message):
    services.api_token_create(user=cast.alice, name="laptop")
    client.force_login(cast.alice)
    before = get_user_model().objects.get(pk=cast.alice.pk).password
    response = client.post(reverse("password_change"), data)
    assert response.status_code == 200
    body = response.content.decode()
    assert any(message in error for error in field_error_ids(body, field))
    label = str(response.context["form"][field].label)
    assert re.search(rf'<a href="#id_{field}">{re.escape(label)}</a>: [^<]*{re.escape(message)}', body), body
    assert get_user_model().objects.get(pk=cast.alice.pk).password == before
    assert ApiToken.objects.filter(user=cast.alice).count() == 1


# --- password reset -----------------------------------------------------------------


def test_login_page_links_to_the_password_reset(client, db):  # the page reads the site's sign-up policy
    body = client.get(reverse("login")).content.decode()
    assert f'href="{reverse("password_reset")}"' in body
    assert reverse("password_reset") == "/accounts/password/reset/"


def reset_link(message):
    match = re.search(r"http://testserver(/accounts/password/reset/[^/\s]+/[^/\s]+/)", message.body)
    assert match, message.body
    return match.group(1)


def test_password_reset_mails_a_link_that_sets_the_password_and_revokes_tokens(
    cast, django_capture_on_commit_callbacks, eager_celery
):
    cast.alice.email = "alice@example.org"
    cast.alice.save()
    _, key = services.api_token_create(user=cast.alice, name="laptop")
    client = Client()
    form = client.get(reverse("password_reset"))
    labels_every_field(form.content.decode())

    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("password_reset"), {"email": "alice@example.org"})
    assert response.status_code == 302 and response["Location"] == reverse("password_reset_done")
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["alice@example.org"] and message.subject == "Reset your approve password"
    assert "alice" in message.body and "revokes all API tokens" in message.body
    assert PASSWORD not in message.body

    link = reset_link(message)
    # Django's view swaps the token in the URL for a session-held one.
    opened = client.get(link)
    assert opened.status_code == 302
    form_url = opened["Location"]
    page = client.get(form_url)
    assert page.status_code == 200 and page.context["validlink"]
    labels_every_field(page.content.decode())
    # Both ApiToken and the password are untouched until the form is sent.
    assert ApiToken.objects.filter(user=cast.alice).count() == 1

    done = client.post(form_url, {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD})
    assert done.status_code == 302 and done["Location"] == reverse("password_reset_complete")
    assert "Sign in with your new password" in client.get(done["Location"]).content.decode()
    cast.alice.refresh_from_db()
    assert cast.alice.check_password(NEW_PASSWORD)
    assert not ApiToken.objects.filter(user=cast.alice).exists()
    assert token_client(key).get(API + "/auth/tokens/").status_code == 401
    assert Client().post(reverse("login"), {"username": "alice", "password": NEW_PASSWORD}).status_code == 302
    # The link works once.
    again = Client().get(link, follow=True)
    assert again.context["validlink"] is False
    assert "This link no longer works" in again.content.decode()


def test_password_reset_answers_the_same_for_an_unknown_address(client, cast, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("password_reset"), {"email": "nobody@example.org"})
    assert response.status_code == 302 and response["Location"] == reverse("password_reset_done")
    assert mail.outbox == []


def test_password_reset_form_errors_name_the_field_and_change_nothing(
    cast, django_capture_on_commit_callbacks, eager_celery
):
    cast.alice.email = "alice@example.org"
    cast.alice.save()
    services.api_token_create(user=cast.alice)
    client = Client()
    bad_email = client.post(reverse("password_reset"), {"email": "not an address"})
    assert bad_email.status_code == 200 and mail.outbox == []
    assert field_error_ids(bad_email.content.decode(), "email") == ["Enter a valid email address."]

    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("password_reset"), {"email": "alice@example.org"})
    form_url = client.get(reset_link(mail.outbox[0]))["Location"]
    mismatch = client.post(form_url, {"new_password1": NEW_PASSWORD, "new_password2": "different-long-password-1"})
    assert mismatch.status_code == 200
    assert field_error_ids(mismatch.content.decode(), "new_password2") == ["The two password fields didn’t match."]
    cast.alice.refresh_from_db()
    assert cast.alice.check_password(PASSWORD)
    assert ApiToken.objects.filter(user=cast.alice).count() == 1


def test_email_url_parsing():
    console = email_from_url("console:")
    assert console["EMAIL_BACKEND"] == "django.core.mail.backends.console.EmailBackend"
    smtp = email_from_url("smtp://mailer:p%40ss@mail.example.com:2525?tls=1&timeout=5")
    assert {
        k: smtp[k]
        for k in (
            "EMAIL_BACKEND",
            "EMAIL_HOST",
            "EMAIL_PORT",
            "EMAIL_HOST_USER",
            "EMAIL_HOST_PASSWORD",
            "EMAIL_USE_TLS",
            "EMAIL_USE_SSL",
            "EMAIL_TIMEOUT",
        )
    } == {
        "EMAIL_BACKEND": "django.core.mail.backends.smtp.EmailBackend",
        "EMAIL_HOST": "mail.example.com",
        "EMAIL_PORT": 2525,
        "EMAIL_HOST_USER": "mailer",
        "EMAIL_HOST_PASSWORD": "p@ss",
        "EMAIL_USE_TLS": True,
        "EMAIL_USE_SSL": False,
        "EMAIL_TIMEOUT": 5,
    }
    assert email_from_url("smtp://mail.example.com?tls=1")["EMAIL_PORT"] == 587
    assert email_from_url("smtp://mail.example.com")["EMAIL_PORT"] == 25
    smtps = email_from_url("smtps://u:p@mail.example.com")
    assert smtps["EMAIL_USE_SSL"] and not smtps["EMAIL_USE_TLS"] and smtps["EMAIL_PORT"] == 465
    assert email_from_url("file:///var/mail/approve")["EMAIL_FILE_PATH"] == "/var/mail/approve"
    for bad, says in [
        ("smtp://h?tls=maybe", "tls must be 1 or 0"),
        ("smtp://h?tls=1&ssl=1", "not both"),
        ("smtp://h?port=1", "unknown option(s) port"),
        ("smtp://", "must name the SMTP host"),
        ("smtp://h?timeout=soon", "EMAIL_URL"),
        ("mailgun://key", "not supported"),
    ]:
        with pytest.raises(ImproperlyConfigured, match=re.escape(says)):
            email_from_url(bad)


# --- token expiry ---------------------------------------------------------------------


def create_token(data):
    return APIClient().post(API + "/auth/token/", {"username": "alice", "password": PASSWORD, **data}, format="json")


def test_a_token_expires_after_the_default_lifetime_or_the_one_asked_for(cast, settings):
    settings.API_TOKEN_LIFETIME_DAYS = 30
    before = timezone.now()
    default = create_token({"name": "default"})
    week = create_token({"name": "week", "expires_in_days": 7})
    after = timezone.now()
    assert default.status_code == 201 and week.status_code == 201
    for response, days in ((default, 30), (week, 7)):
        token = ApiToken.objects.get(pk=response.json()["id"])
        assert before + timedelta(days=days) <= token.expires_at <= after + timedelta(days=days)
        assert response.json()["expires_at"] == token.expires_at.isoformat().replace("+00:00", "Z")
    listed = token_client(week.json()["token"]).get(API + "/auth/tokens/").json()["results"]
    assert {t["name"]: t["expires_at"] for t in listed} == {
        "week": week.json()["expires_at"],
        "default": default.json()["expires_at"],
    }


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "Ensure this value is greater than or equal to 1."),
        (366, "must be between 1 and 365 days, got 366"),
        (10**30, "must be between 1 and 365 days"),
        ("soon", "A valid integer is required."),
        (2.5, "A valid integer is required."),
    ],
)
def test_a_token_lifetime_out_of_bounds_is_refused_naming_the_field(cast, value, message):
    response = create_token({"expires_in_days": value})
    assert response.status_code == 400
    assert list(error_fields(response)) == ["expires_in_days"]
    assert message in error_fields(response)["expires_in_days"][0]
    assert not ApiToken.objects.exists()


def test_an_expired_token_authenticates_no_one(cast):
    token, key = services.api_token_create(user=cast.alice, name="old", expires_in_days=1)
    client = token_client(key)
    assert client.get(API + "/studies/").status_code == 200
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    response = client.get(API + "/studies/")
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Token"
    assert response.json()["detail"].startswith("Token expired at ")
    assert response.json()["detail"].endswith("create a new one.")
    last_used = ApiToken.objects.get(pk=token.pk).last_used_at
    # A refused request does not count as a use.
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=None)
    client.get(API + "/studies/")
    assert ApiToken.objects.get(pk=token.pk).last_used_at is None and last_used is not None


def test_the_service_refuses_a_lifetime_that_is_not_a_whole_number(cast):
    from workspace.errors import InvalidInput

    for value in (True, 1.0, "7"):
        with pytest.raises(InvalidInput) as refused:
            services.api_token_create(user=cast.alice, expires_in_days=value)
        assert list(refused.value.errors) == ["expires_in_days"]
    assert not ApiToken.objects.exists()


# --- the tokens page ----------------------------------------------------------------


def test_tokens_page_creates_a_token_showing_its_key_once(client, cast, settings):
    settings.API_TOKEN_LIFETIME_DAYS = 90
    client.force_login(cast.alice)
    page = client.get("/accounts/tokens/")
    assert page.status_code == 200 and "No tokens yet." in page.content.decode()
    labels_every_field(page.content.decode())

    created = client.post(reverse("api_tokens"), {"name": "laptop", "expires_in_days": "14"})
    assert created.status_code == 200 and created["Cache-Control"] == "no-store"
    token = ApiToken.objects.get(user=cast.alice)
    key = created.context["created"][1]
    body = created.content.decode()
    assert f'value="{key}"' in body and "shown only this once" in body
    assert token.name == "laptop" and token.prefix == key[:8]
    assert abs(token.expires_at - (timezone.now() + timedelta(days=14))) < timedelta(minutes=1)
    assert token_client(key).get(API + "/studies/").status_code == 200

    again = client.get(reverse("api_tokens")).content.decode()
    assert key not in again
    row = re.search(r"<tr>\s*<td><span class=\"table__title\">laptop</span>.*?</tr>", again, re.S).group(0)
    assert f"<code>{key[:8]}…</code>" in row
    assert token.expires_at.strftime("%-d %b %Y") in row and "expired" not in row
    # Last used: by the API call above.
    assert ApiToken.objects.get(pk=token.pk).last_used_at.strftime("%-d %b %Y, %H:%M") in row and "never" not in row
    assert f'href="{reverse("api_token_revoke", args=[token.pk])}"' in row


def test_tokens_page_marks_expired_tokens_in_words(client, cast):
    token, _ = services.api_token_create(user=cast.alice, name="old")
    ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(days=1))
    client.force_login(cast.alice)
    body = client.get(reverse("api_tokens")).content.decode()
    assert '<span class="badge badge--expired">expired</span>' in body


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"name": "x", "expires_in_days": "0"}, "expires_in_days", "must be between 1 and 365 days, got 0"),
        ({"name": "x", "expires_in_days": "400"}, "expires_in_days", "must be between 1 and 365 days, got 400"),
        ({"name": "x", "expires_in_days": "soon"}, "expires_in_days", "Enter a whole number."),
        ({"name": "n" * 101}, "name", "Ensure this value has at most 100 characters (it has 101)."),
        ({"name": "bad\x00name"}, "name", "Null characters are not allowed."),
    ],
)
def test_tokens_page_errors_name_the_field_and_write_nothing(client, cast, data, field, message):
    client.force_login(cast.alice)
    response = client.post(reverse("api_tokens"), data)
    assert response.status_code == 200 and response.context["created"] is None
    body = response.content.decode()
    assert field_error_ids(body, field) == [message]
    label = str(response.context["form"][field].label)
    assert f'<a href="#id_{field}">{label}</a>: {message}' in body.replace("&#x27;", "'")
    assert not ApiToken.objects.exists()


def test_revoking_from_the_page_asks_first_and_touches_only_my_token(client, cast):
    mine, _ = services.api_token_create(user=cast.alice, name="laptop")
    bobs, _ = services.api_token_create(user=cast.bob, name="bob's")
    client.force_login(cast.alice)
    url = reverse("api_token_revoke", args=[mine.pk])
    confirm = client.get(url)
    assert confirm.status_code == 200
    body = confirm.content.decode()
    assert "Revoke the token “laptop”" in body and "cannot be undone" in body
    assert re.search(rf'<form method="post" action="{url}"', body)
    assert ApiToken.objects.filter(pk=mine.pk).exists()  # asking changed nothing

    assert client.get(reverse("api_token_revoke", args=[bobs.pk])).status_code == 404
    assert client.post(reverse("api_token_revoke", args=[bobs.pk])).status_code == 404
    assert ApiToken.objects.filter(pk=bobs.pk).exists()

    done = client.post(url, follow=True)
    assert done.redirect_chain == [(reverse("api_tokens"), 302)]
    assert f"The token “laptop” ({mine.prefix}…) was revoked." in done.content.decode()
    assert not ApiToken.objects.filter(pk=mine.pk).exists()


def test_tokens_page_query_count_does_not_grow_with_tokens(client, cast, django_assert_num_queries):
    client.force_login(cast.alice)
    for count in (1, 5):
        while ApiToken.objects.filter(user=cast.alice).count() < count:
            services.api_token_create(user=cast.alice, name=f"t{count}")
        # session, user, the tokens
        with django_assert_num_queries(4):  # with the header's unread notifications
            response = client.get(reverse("api_tokens"))
        assert len(response.context["tokens"]) == count


# --- log-in lock-out ----------------------------------------------------------------


def login(username, password, address="203.0.113.5"):
    return Client(REMOTE_ADDR=address).post(reverse("login"), {"username": username, "password": password})


def test_a_locked_out_username_leaves_others_at_the_same_address_free(cast, settings):
    settings.LOGIN_FAILURE_LIMIT = 3
    for _ in range(3):
        assert login("alice", "guess").status_code == 200
    locked = login("alice", PASSWORD)
    assert locked.status_code == 429
    assert "Too many failed attempts for this username from your address" in locked.content.decode()
    # Case and spaces do not make another username for the count.
    assert login(" ALICE ", PASSWORD).status_code == 429
    # Bob behind the same address (an office NAT) still logs in.
    assert login("bob", PASSWORD).status_code == 302
    # Alice from another address too.
    assert login("alice", PASSWORD, address="198.51.100.7").status_code == 302


def test_the_address_as_a_whole_has_a_higher_ceiling(cast, settings):
    settings.LOGIN_FAILURE_LIMIT = 3
    settings.LOGIN_FAILURE_ADDRESS_LIMIT = 7
    for attempt in range(7):
        # Spread over usernames so no single username reaches its limit.
        assert login(f"user{attempt % 4}", "guess").status_code == 200
    refused = login("bob", PASSWORD)
    assert refused.status_code == 429
    assert "Too many failed attempts from your address" in refused.content.decode()
    assert login("bob", PASSWORD, address="198.51.100.7").status_code == 302


def test_a_successful_login_clears_that_usernames_count(cast, settings):
    settings.LOGIN_FAILURE_LIMIT = 3
    for _ in range(2):
        login("alice", "guess")
    assert login("alice", PASSWORD).status_code == 302
    for _ in range(2):
        login("alice", "guess")
    assert login("alice", PASSWORD).status_code == 302


def test_the_lockout_fails_open_when_the_cache_is_down(cast, settings):
    with mock.patch("workspace.lockout.cache") as broken:
        broken.get_many.side_effect = ConnectionError("cache down")
        broken.add.side_effect = ConnectionError("cache down")
        broken.delete.side_effect = ConnectionError("cache down")
        assert login("alice", "guess").status_code == 200
        assert login("alice", PASSWORD).status_code == 302
