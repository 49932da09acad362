"""Self sign-up (issue 32, item 2): the site policy (closed, invitation
only, listed domains, open) on the page and the API, the e-mail verified
before any account exists, no account enumeration, single-use expiring
links, the throttles, look-alike usernames, the policy changed between the
steps, the sign-in page's link and the admin's policy page."""

import hashlib
import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounts import signup
from accounts.models import SignUpRequest, SitePolicy
from tests.fixtures import PASSWORD
from tests.two_factor import verified_client
from workspace import invitations
from workspace.models import EmailConfirmation, Membership, Phase
from workspace.services.accounts import USERNAME_TAKEN

pytestmark = pytest.mark.django_db

PAGE = "/accounts/signup/"
API = "/api/v1/accounts/signup/"
COMPLETE = "/api/v1/accounts/signup/complete/"
NEW_PASSWORD = "a-fresh-passphrase-31"
LINK = re.compile(r"http://testserver/accounts/signup/([A-Za-z0-9_-]{20,})/")


@pytest.fixture(autouse=True)
def _mail(eager_celery, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.PASSWORD_SIGN_IN = True


def set_policy(kind: str, domains: str = "") -> SitePolicy:
    policy = SitePolicy.current()
    policy.signup, policy.signup_domains = kind, domains
    policy.full_clean()
    policy.save()
    return policy


def api_ask(capture, email: object, *, address: str = "192.0.2.10"):
    with capture(execute=True):
        return APIClient(REMOTE_ADDR=address).post(API, {"email": email}, format="json")


def page_ask(capture, email: str, *, address: str = "192.0.2.10"):
    with capture(execute=True):
        return Client(REMOTE_ADDR=address).post(PAGE, {"email": email})


def token_of(message) -> str:
    found = LINK.search(message.body)
    assert found, message.body
    return found.group(1)


def link_for(capture, email: str) -> str:
    before = len(mail.outbox)
    assert api_ask(capture, email).status_code == 202
    assert len(mail.outbox) == before + 1
    return token_of(mail.outbox[-1])


def complete(token: str, username: str = "dana", password: str = NEW_PASSWORD, **extra):
    return APIClient(REMOTE_ADDR="192.0.2.10").post(
        COMPLETE, {"token": token, "username": username, "password": password, **extra}, format="json"
    )


def nothing_created(users_before: int) -> None:
    assert User.objects.count() == users_before
    assert not EmailConfirmation.objects.exists()


# --- closed and invitation only ------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("closed", "Sign-up is closed on this site: accounts are created by an administrator"),
        ("invitation", "Accounts on this site come through a study&#x27;s invitation"),
    ],
)
def test_a_closed_policy_shows_who_to_ask_and_refuses_every_request(
    kind, words, django_capture_on_commit_callbacks, cast
):
    set_policy(kind)
    page = Client().get(PAGE)
    assert page.status_code == 200 and words in page.content.decode()
    assert 'name="email"' not in page.content.decode()
    posted = page_ask(django_capture_on_commit_callbacks, "new@example.org")
    assert posted.status_code == 403 and words in posted.content.decode()
    refused = api_ask(django_capture_on_commit_callbacks, "new@example.org")
    assert refused.status_code == 403
    body = refused.json()
    assert body["code"] == "signup_closed" and body["detail"].startswith(words.replace("&#x27;", "'"))
    assert mail.outbox == [] and not SignUpRequest.objects.exists()
    # The step-2 endpoint is closed too, whatever the token.
    assert complete("x" * 43).json()["code"] == "signup_closed"


def test_sign_up_is_closed_when_only_single_sign_on_signs_in(settings, django_capture_on_commit_callbacks):
    set_policy("open")
    settings.PASSWORD_SIGN_IN = False
    settings.OIDC_PROVIDER_NAME = "Example IdP"
    refused = api_ask(django_capture_on_commit_callbacks, "new@example.org")
    assert refused.status_code == 403 and "single sign-on: sign in with Example IdP" in refused.json()["detail"]
    assert mail.outbox == []


# --- open: the whole way, page and API ---------------------------------------------


def test_open_sign_up_on_the_pages_creates_a_confirmed_account_that_designs_a_study(
    django_capture_on_commit_callbacks,
):
    set_policy("open")
    form = Client().get(PAGE)
    assert form.status_code == 200 and 'name="email"' in form.content.decode()
    client = Client(REMOTE_ADDR="192.0.2.10")
    with django_capture_on_commit_callbacks(execute=True):
        sent = client.post(PAGE, {"email": "  Dana@Example.ORG "})
    assert sent.status_code == 200
    assert "If this address may sign up, we sent it a link" in sent.content.decode()
    assert "Dana@example.org" in sent.content.decode()
    # No account yet: only the request, its token's digest stored.
    assert not User.objects.filter(email__iexact="dana@example.org").exists()
    (message,) = mail.outbox
    assert message.to == ["Dana@example.org"] and message.subject == "Create your account on approve"
    token = token_of(message)
    html = message.alternatives[0][0]
    assert f"http://testserver/accounts/signup/{token}/" in html and message.alternatives[0][1] == "text/html"
    request = SignUpRequest.objects.get()
    assert request.digest == hashlib.sha256(token.encode()).hexdigest() and token not in request.digest
    assert abs(request.expires_at - request.created_at - timedelta(hours=24)) < timedelta(seconds=5)

    step2 = client.get(f"/accounts/signup/{token}/")
    assert step2.status_code == 200 and "Dana@example.org" in step2.content.decode()
    done = client.post(
        f"/accounts/signup/{token}/",
        {"username": "dana", "name": "Dana  Scully", "password": NEW_PASSWORD, "password_again": NEW_PASSWORD},
    )
    assert done.status_code == 302 and done["Location"] == "/"
    user = User.objects.get(username="dana")
    assert (user.email, user.first_name, user.last_name) == ("Dana@example.org", "Dana", "Scully")
    assert user.check_password(NEW_PASSWORD)
    confirmation = EmailConfirmation.objects.get(user=user)
    assert confirmation.email == user.email and confirmation.confirmed_at is not None
    assert SignUpRequest.objects.get().used_at is not None
    # Signed in, and may design a study.
    assert int(client.session["_auth_user_id"]) == user.pk
    study = client.post("/api/v1/studies/", {"title": "Dana's study"}, content_type="application/json")
    assert study.status_code == 201, study.content
    assert Membership.objects.get(study_id=study.json()["id"], user=user).role == Membership.Role.DESIGNER


def test_open_sign_up_through_the_api(django_capture_on_commit_callbacks):
    set_policy("open")
    answer = api_ask(django_capture_on_commit_callbacks, "erin@example.org")
    assert answer.status_code == 202
    assert answer.json() == {"detail": signup.SENT, "email": "erin@example.org", "link_hours": 24}
    assert answer["Location"] == "http://testserver/api/v1/accounts/signup/"
    token = token_of(mail.outbox[0])
    created = complete(token, "erin", name="Erin")
    assert created.status_code == 201, created.content
    assert created.json() == {"username": "erin", "email": "erin@example.org", "name": "Erin", "email_confirmed": True}
    assert created["Location"] == "http://testserver/api/v1/accounts/me/"
    user = User.objects.get(username="erin")
    assert EmailConfirmation.objects.get(user=user).email == "erin@example.org"
    # The new account gets an API token with its password, and designs a study with it.
    key = APIClient().post("/api/v1/auth/token/", {"username": "erin", "password": NEW_PASSWORD}, format="json")
    assert key.status_code == 201
    api = APIClient(HTTP_AUTHORIZATION=f"Token {key.json()['token']}")
    assert api.get("/api/v1/accounts/me/").json() == created.json()
    assert api.post("/api/v1/studies/", {"title": "Erin's"}, format="json").status_code == 201


@pytest.mark.parametrize(
    ("kind", "domains", "expected"),
    [
        ("closed", "", {"signup": "closed", "open": False, "domains": [], "link_hours": 24}),
        ("invitation", "", {"signup": "invitation", "open": False, "domains": [], "link_hours": 24}),
        (
            "domains",
            "B.org\na.org",
            {"signup": "domains", "open": True, "domains": ["b.org", "a.org"], "link_hours": 24},
        ),
        ("open", "ignored.org", {"signup": "open", "open": True, "domains": [], "link_hours": 24}),
    ],
)
def test_the_api_says_who_may_sign_up(kind, domains, expected):
    set_policy(kind, domains)
    answer = APIClient().get(API)
    assert answer.status_code == 200 and answer.json() == expected
    assert APIClient().get(API, HTTP_ACCEPT="text/csv").status_code == 406


def test_your_account_says_whether_its_address_is_confirmed(cast):
    api = APIClient()
    assert api.get("/api/v1/accounts/me/").status_code == 401
    api.force_authenticate(cast.bob)
    assert api.get("/api/v1/accounts/me/").json() == {
        "username": "bob",
        "email": "",
        "name": "",
        "email_confirmed": False,
    }
    cast.bob.email = "bob@example.org"
    cast.bob.save()
    EmailConfirmation.objects.create(user=cast.bob, email="old@example.org", confirmed_at=timezone.now())
    assert api.get("/api/v1/accounts/me/").json()["email_confirmed"] is False  # another address was confirmed
    EmailConfirmation.objects.filter(user=cast.bob).update(email="bob@example.org")
    assert api.get("/api/v1/accounts/me/").json()["email_confirmed"] is True


def test_step_two_errors_name_their_field_and_write_nothing(django_capture_on_commit_callbacks, cast):
    set_policy("open")
    token = link_for(django_capture_on_commit_callbacks, "frank@example.org")
    users = User.objects.count()
    short = complete(token, "frank", "short")
    assert short.status_code == 400 and list(short.json()["fields"]) == ["password"]
    bad_name = complete(token, "frank bar")
    assert bad_name.status_code == 400 and list(bad_name.json()["fields"]) == ["username"]
    invisible = complete(token, "frank", name="Frank\u202eknarf")
    assert invisible.status_code == 400 and list(invisible.json()["fields"]) == ["name"]
    unknown_field = complete(token, "frank", is_staff=True)
    assert unknown_field.status_code == 400 and list(unknown_field.json()["fields"]) == ["is_staff"]
    nothing_created(users)
    assert SignUpRequest.objects.get().used_at is None
    # The page: the two passwords must agree, errors under their fields.
    page = Client().post(
        f"/accounts/signup/{token}/",
        {"username": "frank", "password": NEW_PASSWORD, "password_again": NEW_PASSWORD + "x"},
    )
    assert page.status_code == 400 and "the two passwords differ" in page.content.decode()
    nothing_created(users)
    assert complete(token, "frank").status_code == 201


# --- no account enumeration ----------------------------------------------------------


def test_an_existing_address_gets_the_same_answer_and_a_mail_only_its_owner_reads(
    django_capture_on_commit_callbacks, cast
):
    set_policy("open")
    cast.alice.email = "alice@example.org"
    cast.alice.save()
    old = api_ask(django_capture_on_commit_callbacks, "ALICE@example.org", address="192.0.2.1")
    new = api_ask(django_capture_on_commit_callbacks, "ALICO@example.org", address="192.0.2.2")
    assert old.status_code == new.status_code == 202
    assert old.json() == {**new.json(), "email": "ALICE@example.org"}
    assert set(old.headers) == set(new.headers) and old["Location"] == new["Location"]
    old_page = page_ask(django_capture_on_commit_callbacks, "alice@example.org", address="192.0.2.3")
    new_page = page_ask(django_capture_on_commit_callbacks, "alicx@example.org", address="192.0.2.4")
    assert old_page.status_code == new_page.status_code == 200
    strip = re.compile(r'name="csrfmiddlewaretoken" value="[^"]+"|csrf[^"]*"[^"]*"')
    assert strip.sub("", old_page.content.decode()).replace("alice@", "X@") == strip.sub(
        "", new_page.content.decode()
    ).replace("alicx@", "X@")
    # The mails: to the owner only; the existing account's has no link to a second account.
    exists, created, exists_page, created_page = mail.outbox
    assert exists.to == ["ALICE@example.org"] and created.to == ["ALICO@example.org"]
    assert exists.subject == "You already have an account on approve"
    assert "http://testserver/accounts/login/" in exists.body
    assert "http://testserver/accounts/password/reset/" in exists.body
    assert not LINK.search(exists.body) and not LINK.search(exists.alternatives[0][0])
    assert "/accounts/signup/" not in exists.body
    assert LINK.search(created.body) and exists_page.subject == exists.subject
    # Only the new addresses have a request; no account was made for either.
    assert sorted(SignUpRequest.objects.values_list("email", flat=True)) == ["ALICO@example.org", "alicx@example.org"]
    assert User.objects.count() == 4


def test_both_answers_do_the_same_work_in_the_request(django_capture_on_commit_callbacks, cast):
    """The request enqueues one task either way; only the task looks the address up."""
    set_policy("open")
    cast.bob.email = "bob@example.org"
    cast.bob.save()
    client = APIClient()
    for email in ("bob@example.org", "bobby@example.org"):
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            assert client.post(API, {"email": email}, format="json").status_code == 202
        assert len(callbacks) == 1
    assert not SignUpRequest.objects.exists() and mail.outbox == []


# --- the link: single use, expiry, unknown ------------------------------------------


def test_a_link_works_once(django_capture_on_commit_callbacks):
    set_policy("open")
    token = link_for(django_capture_on_commit_callbacks, "gina@example.org")
    assert complete(token, "gina").status_code == 201
    again = complete(token, "gina2")
    assert again.status_code == 400
    assert again.json()["fields"] == {"token": [signup.USED_LINK]}
    assert not User.objects.filter(username="gina2").exists()
    page = Client().get(f"/accounts/signup/{token}/")
    assert page.status_code == 400
    assert "<p>This sign-up link was already used: sign in with the account it created.</p>" in page.content.decode()


def test_a_second_link_to_the_same_address_is_used_up_by_the_first(django_capture_on_commit_callbacks):
    set_policy("open")
    first = link_for(django_capture_on_commit_callbacks, "hal@example.org")
    second = link_for(django_capture_on_commit_callbacks, "hal@example.org")
    assert complete(second, "hal").status_code == 201
    assert complete(first, "hal-two").json()["fields"] == {"token": [signup.USED_LINK]}
    assert User.objects.filter(email="hal@example.org").count() == 1


def test_an_expired_or_unknown_link_is_refused_naming_token(django_capture_on_commit_callbacks):
    set_policy("open")
    token = link_for(django_capture_on_commit_callbacks, "ivy@example.org")
    SignUpRequest.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    users = User.objects.count()
    assert complete(token, "ivy").json()["fields"] == {"token": [signup.EXPIRED_LINK]}
    page = Client().get(f"/accounts/signup/{token}/")
    assert page.status_code == 400 and "has expired" in page.content.decode()
    for wrong in (token[:-1], token + "A", "A" * 43, hashlib.sha256(token.encode()).hexdigest()):
        assert complete(wrong, "ivy").json()["fields"] == {"token": [signup.UNKNOWN_LINK]}
    # The page's POST with an unknown token writes nothing either.
    posted = Client().post(
        "/accounts/signup/nope/", {"username": "ivy", "password": NEW_PASSWORD, "password_again": NEW_PASSWORD}
    )
    assert posted.status_code == 400 and "not valid" in posted.content.decode()
    nothing_created(users)


def test_an_address_that_got_an_account_meanwhile_cannot_get_a_second(django_capture_on_commit_callbacks, cast):
    set_policy("open")
    token = link_for(django_capture_on_commit_callbacks, "jo@example.org")
    cast.carol.email = "JO@example.org"
    cast.carol.save()
    refused = complete(token, "jo")
    assert refused.status_code == 400 and list(refused.json()["fields"]) == ["token"]
    assert "exists by now" in refused.json()["fields"]["token"][0]
    assert not User.objects.filter(username="jo").exists()


# --- the policy changed between the steps ----------------------------------------------


@pytest.mark.parametrize("kind", ["closed", "invitation"])
def test_the_policy_is_read_again_when_the_link_is_followed(kind, django_capture_on_commit_callbacks):
    set_policy("open")
    token = link_for(django_capture_on_commit_callbacks, "kim@example.org")
    set_policy(kind)
    users = User.objects.count()
    assert complete(token, "kim").json()["code"] == "signup_closed"
    page = Client().get(f"/accounts/signup/{token}/")
    assert page.status_code == 403 and 'name="username"' not in page.content.decode()
    posted = Client().post(
        f"/accounts/signup/{token}/", {"username": "kim", "password": NEW_PASSWORD, "password_again": NEW_PASSWORD}
    )
    assert posted.status_code == 403
    nothing_created(users)
    # Opened again, the link still works.
    set_policy("open")
    assert complete(token, "kim").status_code == 201


def test_a_domain_no_longer_listed_cannot_complete(django_capture_on_commit_callbacks):
    set_policy("domains", "example.org\nexample.net")
    token = link_for(django_capture_on_commit_callbacks, "lee@example.org")
    set_policy("domains", "example.net")
    refused = complete(token, "lee")
    assert refused.status_code == 403 and refused.json()["code"] == "signup_closed"
    assert "no longer open to lee@example.org" in refused.json()["detail"]
    assert not User.objects.filter(username="lee").exists()


def test_no_mail_when_the_policy_closed_before_the_task_ran(django_capture_on_commit_callbacks):
    set_policy("open")
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        assert APIClient().post(API, {"email": "max@example.org"}, format="json").status_code == 202
    set_policy("closed")
    for callback in callbacks:
        callback()
    assert mail.outbox == [] and not SignUpRequest.objects.exists()


# --- listed domains ------------------------------------------------------------------


@pytest.mark.parametrize(
    "email",
    ["ned@example.org", "ned@EXAMPLE.ORG", "Ned@Lab.Example.net", "ned@xn--bcher-kva.example", "ned@BÜCHER.example"],
)
def test_listed_domains_case_and_idna_aside(email, django_capture_on_commit_callbacks):
    set_policy("domains", "example.org\n  LAB.example.NET \n\nbücher.example")
    assert api_ask(django_capture_on_commit_callbacks, email).status_code == 202
    assert len(mail.outbox) == 1 and SignUpRequest.objects.count() == 1


@pytest.mark.parametrize(
    "email",
    [
        "ned@sub.example.org",  # a subdomain is not its parent
        "ned@example.org.evil.test",
        "ned@evilexample.org",
        "ned@example.net",  # lab.example.net's parent
        "ned@example.org@evil.test",  # not an address
        '"ned@example.org"@evil.test',  # quoted: the domain is evil.test
        "ned@example.org\n@evil.test",
        "ned@exаmple.org",  # a Cyrillic "а"
        "ned@example.org.",
    ],
)
def test_unlisted_domains_and_look_alikes_are_refused_naming_email(email, django_capture_on_commit_callbacks):
    set_policy("domains", "example.org\nlab.example.net")
    refused = api_ask(django_capture_on_commit_callbacks, email)
    assert refused.status_code == 400, refused.content
    assert list(refused.json()["fields"]) == ["email"]
    page = page_ask(django_capture_on_commit_callbacks, email)
    assert page.status_code == 400 and 'aria-invalid="true"' in page.content.decode()
    assert mail.outbox == [] and not SignUpRequest.objects.exists()


def test_the_domains_refusal_names_the_listed_domains(django_capture_on_commit_callbacks):
    set_policy("domains", "example.org\nlab.example.net")
    refused = api_ask(django_capture_on_commit_callbacks, "ned@gmail.test")
    assert refused.json()["fields"]["email"][0].startswith(
        "sign-up here is open only to addresses at example.org, lab.example.net"
    )
    page = Client().get(PAGE).content.decode()
    assert "<strong>example.org</strong>, <strong>lab.example.net</strong>" in page


@pytest.mark.parametrize("email", ["", "   ", "not an address", 42, None, "a" * 300 + "@example.org"])
def test_malformed_addresses_are_refused_naming_email(email, django_capture_on_commit_callbacks):
    set_policy("open")
    refused = api_ask(django_capture_on_commit_callbacks, email)
    assert refused.status_code == 400 and list(refused.json()["fields"]) == ["email"]
    assert mail.outbox == []


def test_the_policy_lists_only_domains():
    policy = SitePolicy.current()
    policy.signup, policy.signup_domains = "domains", "example.org\nnot a domain\nlocalhost"
    with pytest.raises(Exception) as refused:
        policy.full_clean()
    assert "not a domain" in str(refused.value) and "localhost" in str(refused.value)
    policy.signup_domains = "\n\n"
    with pytest.raises(Exception, match="list at least one domain"):
        policy.full_clean()


# --- throttles -----------------------------------------------------------------------


def test_per_address_throttle_across_clients_page_and_api(settings, django_capture_on_commit_callbacks, cast):
    """A victim's mailbox cannot be flooded: five requests an hour for one
    address (case aside), from any clients, page and API counted together."""
    set_policy("open")
    cast.alice.email = "victim@example.org"
    cast.alice.save()
    settings.SIGNUP_ADDRESS_RATE = "3/hour"
    assert api_ask(django_capture_on_commit_callbacks, "victim@example.org", address="192.0.2.1").status_code == 202
    assert api_ask(django_capture_on_commit_callbacks, "VICTIM@example.org", address="192.0.2.2").status_code == 202
    assert page_ask(django_capture_on_commit_callbacks, "Victim@example.org", address="192.0.2.3").status_code == 200
    refused = api_ask(django_capture_on_commit_callbacks, "victim@EXAMPLE.org", address="192.0.2.4")
    assert refused.status_code == 429 and refused.json()["code"] == "throttled"
    assert refused.json()["detail"].startswith("Too many sign-up requests for this address (at most 3/hour).")
    assert 3500 <= int(refused["Retry-After"]) <= 3600
    page = page_ask(django_capture_on_commit_callbacks, "victim@example.org", address="192.0.2.5")
    assert page.status_code == 429 and "Too many sign-up requests for this address" in page.content.decode()
    assert len(mail.outbox) == 3
    # Another address is not affected.
    assert api_ask(django_capture_on_commit_callbacks, "other@example.org", address="192.0.2.4").status_code == 202


def test_per_client_throttle(settings, django_capture_on_commit_callbacks):
    set_policy("open")
    settings.SIGNUP_CLIENT_RATE = "3/hour"
    for number in range(3):
        assert api_ask(django_capture_on_commit_callbacks, f"p{number}@example.org").status_code == 202
    refused = api_ask(django_capture_on_commit_callbacks, "p9@example.org")
    assert refused.status_code == 429
    assert refused.json()["detail"].startswith("Too many sign-up requests from your network (at most 3/hour).")
    page = page_ask(django_capture_on_commit_callbacks, "p8@example.org")
    assert page.status_code == 429 and "Too many sign-up requests from your network" in page.content.decode()
    assert len(mail.outbox) == 3
    # Another client is not affected; the link's step counts against the client too.
    token = token_of(mail.outbox[0])
    assert api_ask(django_capture_on_commit_callbacks, "q@example.org", address="198.51.100.1").status_code == 202
    assert complete(token, "p-zero").status_code == 429
    other = APIClient(REMOTE_ADDR="198.51.100.2").post(
        COMPLETE, {"token": token, "username": "p-zero", "password": NEW_PASSWORD}, format="json"
    )
    assert other.status_code == 201


# --- usernames -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["alice", "Alice", "ALICE", "ａｌｉｃｅ", "Ａｌｉｃｅ"])
def test_a_username_that_reads_as_an_existing_one_is_taken(name, django_capture_on_commit_callbacks, cast):
    set_policy("open")
    token = link_for(django_capture_on_commit_callbacks, "newalice@example.org")
    users = User.objects.count()
    refused = complete(token, name)
    assert refused.status_code == 400
    assert refused.json()["fields"] == {"username": [USERNAME_TAKEN]}
    nothing_created(users)
    # The link is not used up by the refusal.
    assert complete(token, "alice-2").status_code == 201


def test_a_new_username_is_kept_in_its_nfkc_form(django_capture_on_commit_callbacks):
    set_policy("open")
    token = link_for(django_capture_on_commit_callbacks, "oz@example.org")
    assert complete(token, "ｏｚ").json()["username"] == "oz"


# --- the sign-in page, a signed-in visitor ---------------------------------------------


@pytest.mark.parametrize(
    ("kind", "offered"), [("closed", False), ("invitation", False), ("domains", True), ("open", True)]
)
def test_the_sign_in_page_offers_sign_up_when_the_policy_does(kind, offered):
    set_policy(kind, "example.org" if kind == "domains" else "")
    page = Client().get("/accounts/login/").content.decode()
    assert ('<a href="/accounts/signup/">Sign up</a>' in page) is offered
    assert ("Ask your study's designer or an administrator" in page.replace("&#x27;", "'")) is not offered


def test_a_signed_in_visitor_is_sent_home(cast):
    set_policy("open")
    client = Client()
    client.force_login(cast.alice, backend="django.contrib.auth.backends.ModelBackend")
    assert client.get(PAGE)["Location"] == "/"
    assert client.get("/accounts/signup/whatever/")["Location"] == "/"


# --- invitation only: the invitation link still signs people up ---------------------------


def test_invitation_only_keeps_the_invitation_links_sign_up(make_study, cast):
    set_policy("invitation")
    built = make_study(Phase.DRAFT)
    _, key = invitations.invitation_create(study=built.study, created_by=cast.alice)
    page = Client().post(
        f"/invitations/{key}/", {"username": "quinn", "password1": NEW_PASSWORD, "password2": NEW_PASSWORD}
    )
    assert page.status_code == 302, page.content.decode()[:2000]
    quinn = User.objects.get(username="quinn")
    assert Membership.objects.filter(study=built.study, user=quinn).exists()


# --- the admin ---------------------------------------------------------------------


def test_the_admin_shows_and_changes_the_one_policy(admin_user):
    client = verified_client(admin_user)
    index = client.get("/admin/").content.decode()
    assert "/admin/accounts/sitepolicy/" in index and "/admin/accounts/signuprequest/" in index
    SitePolicy.objects.all().delete()  # the list makes the one policy when there is none yet
    listed = client.get("/admin/accounts/sitepolicy/")
    policy = SitePolicy.objects.get()
    change = f"/admin/accounts/sitepolicy/{policy.pk}/change/"
    assert listed.status_code == 200 and f'href="{change}"' in listed.content.decode()
    assert "/admin/accounts/sitepolicy/add/" not in listed.content.decode()
    page = client.get(change).content.decode()
    assert "Invitation only: through a study" in page and "Delete" not in page
    changed = client.post(
        change,
        {"signup": "domains", "signup_domains": "Example.org\nlab.example.net"},
    )
    assert changed.status_code == 302, changed.content.decode()[:3000]
    policy.refresh_from_db()
    assert policy.signup == "domains" and policy.domains() == ["example.org", "lab.example.net"]
    refused = client.post(change, {"signup": "domains", "signup_domains": ""})
    assert refused.status_code == 200 and "list at least one domain" in refused.content.decode()
    refused = client.post(change, {"signup": "domains", "signup_domains": "example.org\nevil domain"})
    assert "not a domain" in refused.content.decode()
    assert client.get("/admin/accounts/sitepolicy/add/").status_code == 403
    assert client.post(f"/admin/accounts/sitepolicy/{policy.pk}/delete/").status_code == 403
    assert SitePolicy.objects.count() == 1
    # What the admin set is what the sign-up reads.
    assert Client().get("/accounts/login/").content.decode().count('href="/accounts/signup/"') == 1


def test_the_admin_lists_sign_up_requests_without_their_digest(admin_user, django_capture_on_commit_callbacks):
    set_policy("open")
    token = link_for(django_capture_on_commit_callbacks, "rae@example.org")
    client = verified_client(admin_user)
    page = client.get("/admin/accounts/signuprequest/").content.decode()
    assert "rae@example.org" in page
    request = SignUpRequest.objects.get()
    detail = client.get(f"/admin/accounts/signuprequest/{request.pk}/change/").content.decode()
    assert "rae@example.org" in detail and request.digest not in detail and token not in detail
    assert client.get("/admin/accounts/signuprequest/add/").status_code == 403


def test_the_page_and_the_api_speak_of_the_same_rates(settings):
    """The settings are read at each use (a site changes them without a restart of the tests' process)."""
    settings.SIGNUP_CLIENT_RATE = "1/minute"
    set_policy("open")
    assert APIClient().post(API, {"email": "s@example.org"}, format="json").status_code == 202
    assert APIClient().post(API, {"email": "t@example.org"}, format="json").status_code == 429


def test_a_user_named_with_the_cast_password_is_not_special(django_capture_on_commit_callbacks):
    """The password validators run with the new account's attributes: a
    password that is the username or the address is refused."""
    set_policy("open")
    token = link_for(django_capture_on_commit_callbacks, "uma.longname@example.org")
    refused = complete(token, "umalongname", "umalongname")
    assert refused.status_code == 400 and list(refused.json()["fields"]) == ["password"]
    assert complete(token, "umalongname", PASSWORD).status_code == 201
