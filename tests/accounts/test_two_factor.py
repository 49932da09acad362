"""Two-factor sign-in (issue 32, item 3): set-up with a real authenticator
(pyotp), the code page after the password, recovery codes, replay, the
lock-out, who must use it, the API and the admin."""

import re
import time
from html import unescape

import pyotp
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse
from django_otp import DEVICE_ID_SESSION_KEY
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice
from rest_framework.test import APIClient

from accounts.models import SitePolicy
from accounts.otp import services
from tests.fixtures import PASSWORD
from tests.two_factor import current_code, enrol, secret_of, verified_client, wrong_code
from workspace import services as workspace_services
from workspace.models import ApiToken

pytestmark = pytest.mark.django_db

SETUP = "/accounts/two-factor/"
VERIFY = "/accounts/two-factor/verify/"
CODES = "/accounts/two-factor/recovery-codes/"
OFF = "/accounts/two-factor/turn-off/"


@pytest.fixture(autouse=True)
def _hosts(settings):
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]


def sign_in(username: str, password: str = PASSWORD, *, address: str = "127.0.0.1") -> Client:
    """A client through the real password form."""
    client = Client(REMOTE_ADDR=address)
    response = client.post(reverse("login"), {"username": username, "password": password})
    assert response.status_code == 302, response.content.decode()[:1500]
    return client


def page_secret(html: str) -> str:
    found = re.search(r'<code id="two-factor-secret"[^>]*>([^<]+)</code>', html)
    assert found, "no secret on the set-up page"
    return found.group(1).replace(" ", "")


def shown_codes(html: str) -> list[str]:
    block = re.search(r'<ol class="two-factor-codes__list"[^>]*>(.*?)</ol>', html, re.DOTALL)
    assert block, "no recovery codes shown"
    return re.findall(r"<code>([a-z0-9-]+)</code>", block.group(1))


def unthrottle() -> None:
    """Skip django-otp's back-off after a failure (1 second at first): the
    next attempt is checked at once."""
    for model in (TOTPDevice, StaticDevice):
        model.objects.update(throttling_failure_count=0, throttling_failure_timestamp=None)


def messages_of(response) -> str:
    return unescape(response.content.decode())


# --- setting it up -------------------------------------------------------------------


def test_set_up_with_a_real_authenticator_and_confirmation(cast):
    client = sign_in("alice")
    page = client.get(SETUP)
    assert page.status_code == 200
    html = page.content.decode()
    # The QR code is drawn on the server, inline, and the secret is there to type.
    assert '<svg role="img" aria-label="QR code' in html and "<path d=" in html
    secret = page_secret(html)
    assert len(secret) == 32 and secret == secret.upper()
    assert page["Cache-Control"] == "no-store"
    # The QR code holds the otpauth:// URI of that secret, which apps read.
    parsed = pyotp.parse_uri(services.setup_uri(cast.alice, client.session[services.SESSION_SETUP_KEY]))
    assert (parsed.secret, parsed.issuer, parsed.name) == (secret, "approve", "approve:alice")
    # A reload shows the same secret (the app may already hold it).
    assert page_secret(client.get(SETUP).content.decode()) == secret

    # A wrong code stores nothing and says why.
    wrong = client.post(SETUP, {"code": wrong_code(secret)})
    assert wrong.status_code == 200
    assert "That code does not match" in messages_of(wrong)
    assert not TOTPDevice.objects.exists() and not StaticDevice.objects.exists()
    assert not services.is_enabled(cast.alice)

    # The app's current code turns it on, shows ten recovery codes once, and
    # the session counts as verified.
    done = client.post(SETUP, {"code": pyotp.TOTP(secret).now()})
    assert done.status_code == 200 and done["Cache-Control"] == "no-store"
    codes = shown_codes(done.content.decode())
    assert len(codes) == 10 and len(set(codes)) == 10
    assert all(re.fullmatch(r"[a-z2-9]{4}-[a-z2-9]{4}-[a-z2-9]{4}", code) for code in codes)
    device = TOTPDevice.objects.get(user=cast.alice)
    assert device.confirmed and secret_of(device) == secret and device.last_t > 0
    # Stored as keyed digests, never as the codes.
    stored = set(StaticToken.objects.filter(device__user=cast.alice).values_list("token", flat=True))
    assert len(stored) == 10
    assert not stored & set(codes) and not stored & {code.replace("-", "") for code in codes}
    assert stored == {services.recovery_digests(code)[0] for code in codes}
    assert client.session[DEVICE_ID_SESSION_KEY] == device.persistent_id
    assert client.get(reverse("home")).status_code == 200
    # The page now says it is on, with the codes left.
    on = client.get(SETUP).content.decode()
    assert "Two-factor sign-in is on" in on and "<dd>10" in on


def test_the_confirming_code_cannot_sign_in_again(cast):
    client = sign_in("alice")
    secret = page_secret(client.get(SETUP).content.decode())
    code = pyotp.TOTP(secret).now()
    assert client.post(SETUP, {"code": code}).status_code == 200
    other = sign_in("alice")
    refused = other.post(VERIFY, {"code": code})
    assert "That code is not right" in messages_of(refused)
    assert DEVICE_ID_SESSION_KEY not in other.session


def test_an_unconfirmed_device_never_lets_anyone_in_nor_asks_for_a_code(cast):
    device = TOTPDevice.objects.create(user=cast.alice, name="half set up", confirmed=False)
    client = sign_in("alice")
    assert client.get(reverse("home")).status_code == 200  # nothing to verify: no confirmed device
    # Its codes verify nothing: the code page has nothing to check them against.
    response = client.post(VERIFY, {"code": pyotp.TOTP(secret_of(device)).now()})
    assert response.status_code == 302 and DEVICE_ID_SESSION_KEY not in client.session
    assert not services.is_enabled(cast.alice)


# --- signing in -------------------------------------------------------------------------


def test_sign_in_requires_the_code_and_only_the_code_page_is_reachable(cast, make_study):
    built = make_study()
    secret = enrol(cast.alice)
    client = sign_in("alice")
    home = client.get(reverse("home"))
    assert home.status_code == 302 and home["Location"] == f"{VERIFY}?next=%2F"
    for path in (reverse("api_tokens"), reverse("password_change"), f"/studies/{built.study.pk}/", SETUP, "/admin/"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith(VERIFY), path
    assert client.post(reverse("api_tokens"), {"name": "sneaky"}).status_code == 302
    assert not ApiToken.objects.filter(user=cast.alice).exists()
    page = client.get(VERIFY + "?next=/accounts/tokens/")
    assert page.status_code == 200 and "Enter your code" in page.content.decode()

    before = client.session.session_key
    done = client.post(VERIFY, {"code": current_code(secret), "next": "/accounts/tokens/"})
    assert done.status_code == 302 and done["Location"] == "/accounts/tokens/"
    # A new session key once verified: a session id known before the code is worthless.
    assert client.session.session_key != before
    assert client.get(reverse("api_tokens")).status_code == 200
    assert client.get(f"/studies/{built.study.pk}/").status_code == 200


def test_logging_out_stays_possible_before_the_code(cast):
    enrol(cast.alice)
    client = sign_in("alice")
    response = client.post(reverse("logout"))
    assert response.status_code == 302 and response["Location"] == reverse("login")
    assert "_auth_user_id" not in client.session


def test_the_code_page_does_not_redirect_elsewhere(cast):
    secret = enrol(cast.alice)
    client = sign_in("alice")
    response = client.post(VERIFY, {"code": current_code(secret), "next": "https://evil.example/steal"})
    assert response.status_code == 302 and response["Location"] == reverse("home")


def test_a_recovery_code_works_once(cast):
    secret = enrol(cast.alice)
    client = verified_client(cast.alice)
    made = client.post(CODES, {"code": "", "password": PASSWORD})
    codes = shown_codes(made.content.decode())
    assert len(codes) == 10
    del secret

    first = sign_in("alice")
    # As typed from paper: upper case, spaces instead of dashes.
    typed = codes[3].upper().replace("-", " ")
    response = first.post(VERIFY, {"code": typed}, follow=True)
    assert response.status_code == 200
    assert "You signed in with a recovery code: it will not work again. 9 left" in messages_of(response)
    assert StaticToken.objects.filter(device__user=cast.alice).count() == 9

    second = sign_in("alice")
    again = second.post(VERIFY, {"code": codes[3]})
    assert again.status_code == 200 and "That code is not right" in messages_of(again)
    assert DEVICE_ID_SESSION_KEY not in second.session


def test_new_recovery_codes_replace_the_old_ones(cast):
    client = verified_client(cast.alice)
    old = shown_codes(client.post(CODES, {"password": PASSWORD}).content.decode())
    new = shown_codes(client.post(CODES, {"password": PASSWORD}).content.decode())
    assert len(new) == 10 and not set(old) & set(new)
    assert StaticToken.objects.filter(device__user=cast.alice).count() == 10
    refused = sign_in("alice").post(VERIFY, {"code": old[0]})
    assert "That code is not right" in messages_of(refused)
    unthrottle()
    accepted = sign_in("alice").post(VERIFY, {"code": new[0]})
    assert accepted.status_code == 302


def test_new_recovery_codes_need_a_code_or_the_password(cast):
    client = verified_client(cast.alice)
    before = set(StaticToken.objects.values_list("token", flat=True))
    refused = client.post(CODES, {"code": "", "password": "not it"})
    assert refused.status_code == 200 and "That is not your password." in messages_of(refused)
    assert set(StaticToken.objects.values_list("token", flat=True)) == before


def test_a_totp_code_cannot_be_replayed(cast):
    secret = enrol(cast.alice)
    code = current_code(secret)
    first = sign_in("alice")
    assert first.post(VERIFY, {"code": code}).status_code == 302
    device = TOTPDevice.objects.get(user=cast.alice)
    assert device.last_t >= 0  # django-otp's record of the time step used
    # The same code, in another session, within its 30 seconds: refused.
    second = sign_in("alice", address="10.0.0.7")
    replay = second.post(VERIFY, {"code": code})
    assert replay.status_code == 200 and "That code is not right" in messages_of(replay)
    assert DEVICE_ID_SESSION_KEY not in second.session
    assert second.get(reverse("home")).status_code == 302


def test_wrong_codes_lock_the_account_s_code_entry(cast, settings):
    settings.TWO_FACTOR_FAILURE_LIMIT = 3
    settings.OTP_TOTP_THROTTLE_FACTOR = 0  # the lock-out under test, not django-otp's back-off
    secret = enrol(cast.alice)
    client = sign_in("alice")
    for _ in range(2):
        response = client.post(VERIFY, {"code": wrong_code(secret)})
        assert response.status_code == 200 and "That code is not right" in messages_of(response)
    locked = client.post(VERIFY, {"code": wrong_code(secret)})
    assert locked.status_code == 429
    text = messages_of(locked)
    assert "Too many wrong codes for this account: entering codes is locked for up to 15 minutes." in text
    assert "someone knows your password" in text
    # Even the right code is not checked now, from this address or another.
    assert client.post(VERIFY, {"code": current_code(secret)}).status_code == 429
    elsewhere = sign_in("alice", address="192.0.2.9")
    assert elsewhere.post(VERIFY, {"code": current_code(secret)}).status_code == 429
    assert DEVICE_ID_SESSION_KEY not in client.session and DEVICE_ID_SESSION_KEY not in elsewhere.session
    # Another account behind the same address is not locked.
    bob_secret = enrol(cast.bob)
    assert sign_in("bob").post(VERIFY, {"code": current_code(bob_secret)}).status_code == 302


def test_wrong_codes_from_one_address_lock_that_address(cast, settings):
    settings.TWO_FACTOR_FAILURE_LIMIT = 2
    settings.TWO_FACTOR_FAILURE_ADDRESS_LIMIT = 3
    settings.OTP_TOTP_THROTTLE_FACTOR = 0
    secrets = {name: enrol(getattr(cast, name)) for name in ("alice", "bob")}
    sign_in("alice").post(VERIFY, {"code": wrong_code(secrets["alice"])})
    sign_in("alice").post(VERIFY, {"code": wrong_code(secrets["alice"])})
    bob = sign_in("bob")
    bob.post(VERIFY, {"code": wrong_code(secrets["bob"])})
    refused = bob.post(VERIFY, {"code": current_code(secrets["bob"])})
    assert refused.status_code == 429 and "Too many wrong codes from your address" in messages_of(refused)


def test_django_otp_s_back_off_slows_guessing_without_the_cache(cast):
    """The database's back-off (1, 2, 4... seconds) holds even when the
    cache's lock-out cannot count."""
    secret = enrol(cast.alice)
    client = sign_in("alice")
    client.post(VERIFY, {"code": wrong_code(secret)})
    hurried = client.post(VERIFY, {"code": current_code(secret)})
    assert "Wait a few seconds before trying another code." in messages_of(hurried)
    assert DEVICE_ID_SESSION_KEY not in client.session


# --- who must use it ------------------------------------------------------------------


def test_staff_must_set_it_up_and_can_do_nothing_else_until_then(cast):
    cast.alice.is_staff = True
    cast.alice.save(update_fields=["is_staff"])
    client = sign_in("alice")
    home = client.get(reverse("home"))
    assert home.status_code == 302 and home["Location"] == f"{SETUP}?next=%2F"
    for path in (reverse("api_tokens"), "/admin/", VERIFY, CODES, OFF):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith(SETUP), path
    api = client.get("/api/v1/studies/")
    assert api.status_code == 403 and api.json()["code"] == "two_factor_required"
    assert "must set up two-factor sign-in" in api.json()["detail"]
    page = client.get(SETUP)
    assert "Your account must use two-factor sign-in." in page.content.decode()

    secret = page_secret(page.content.decode())
    assert client.post(SETUP, {"code": pyotp.TOTP(secret).now()}).status_code == 200
    assert client.get(reverse("home")).status_code == 200
    assert client.get("/admin/").status_code == 200
    # Required: it cannot be turned off, even with the password.
    refused = client.post(OFF, {"password": PASSWORD}, follow=True)
    assert "cannot be turned off" in messages_of(refused)
    assert services.is_enabled(cast.alice)


def test_becoming_staff_applies_at_once(cast):
    client = sign_in("alice")
    assert client.get(reverse("home")).status_code == 200
    cast.alice.is_staff = True
    cast.alice.save(update_fields=["is_staff"])
    assert client.get(reverse("home"))["Location"].startswith(SETUP)


def test_designers_must_set_it_up_when_the_site_says_so_and_not_otherwise(cast, make_study):
    make_study()  # alice designs it; bob and carol are its experts
    assert sign_in("alice").get(reverse("home")).status_code == 200
    policy = SitePolicy.current()
    policy.designers_need_two_factor = True
    policy.save()
    alice = sign_in("alice")
    assert alice.get(reverse("home"))["Location"] == f"{SETUP}?next=%2F"
    # An expert is not a designer: nothing asked.
    assert sign_in("bob").get(reverse("home")).status_code == 200
    # Once set up, a designer may not turn it off while the policy holds.
    secret = page_secret(alice.get(SETUP).content.decode())
    alice.post(SETUP, {"code": pyotp.TOTP(secret).now()})
    assert alice.get(OFF).status_code == 200 and "cannot be turned off" in alice.get(OFF).content.decode()
    policy.designers_need_two_factor = False
    policy.save()
    assert not services.is_required(cast.alice)


def test_a_session_looks_again_after_the_recheck_interval(cast, settings):
    settings.TWO_FACTOR_RECHECK_SECONDS = 0
    client = sign_in("alice")
    assert client.get(reverse("home")).status_code == 200
    enrol(cast.alice)  # e.g. in another session
    assert client.get(reverse("home"))["Location"].startswith(VERIFY)


# --- turning it off, an administrator's reset --------------------------------------------


def test_turning_it_off_needs_a_current_code_or_the_password(cast):
    secret = enrol(cast.alice)
    client = verified_client(cast.alice)
    wrong = client.post(OFF, {"code": wrong_code(secret), "password": ""})
    assert wrong.status_code == 200 and "That code is not right" in messages_of(wrong)
    assert client.post(OFF, {"code": "", "password": "guess"}).status_code == 200
    nothing = client.post(OFF, {"code": "", "password": ""})
    assert "Enter a current code from your app, a recovery code, or your password." in messages_of(nothing)
    assert services.is_enabled(cast.alice)
    unthrottle()

    # The code of the next time step (the current one verified the session: a replay).
    next_code = pyotp.TOTP(secret).at(time.time(), counter_offset=1)
    done = client.post(OFF, {"code": next_code, "password": ""}, follow=True)
    assert "Two-factor sign-in is off" in messages_of(done)
    assert not TOTPDevice.objects.exists() and not StaticDevice.objects.exists()
    assert sign_in("alice").get(reverse("home")).status_code == 200  # the password alone again


def test_wrong_passwords_on_the_turn_off_page_count_towards_the_log_in_lock_out(cast, settings):
    settings.LOGIN_FAILURE_LIMIT = 2
    enrol(cast.alice)
    client = verified_client(cast.alice)
    for _ in range(2):
        client.post(OFF, {"password": "guess"})
    locked = client.post(OFF, {"password": PASSWORD})
    assert "Too many failed attempts" in messages_of(locked)
    assert services.is_enabled(cast.alice)


def test_an_administrator_resets_a_lost_phone(cast, capsys):
    cast.alice.is_staff = True
    cast.alice.save(update_fields=["is_staff"])
    enrol(cast.alice)
    call_command("two_factor_reset", "alice")
    assert "Removed 2 two-factor device(s) of alice" in capsys.readouterr().out
    assert not TOTPDevice.objects.exists() and not StaticToken.objects.exists()
    # Staff: set it up again at the next sign-in.
    assert sign_in("alice").get(reverse("home"))["Location"].startswith(SETUP)
    call_command("two_factor_reset", "alice")
    assert "had no two-factor device" in capsys.readouterr().out


# --- the API ------------------------------------------------------------------------------


def test_api_tokens_never_ask_for_a_code(cast):
    enrol(cast.alice)
    _, key = workspace_services.api_token_create(user=cast.alice, name="ci")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    response = client.get("/api/v1/studies/")
    assert response.status_code == 200 and "results" in response.json()
    # Even from a browser whose session is signed in but not verified.
    browser = sign_in("alice")
    response = browser.get("/api/v1/studies/", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 200


def test_a_session_without_its_code_is_refused_by_the_api(cast):
    secret = enrol(cast.alice)
    client = sign_in("alice")
    response = client.get("/api/v1/studies/")
    assert response.status_code == 403
    body = response.json()
    assert body["code"] == "two_factor_required"
    assert "has not finished two-factor sign-in" in body["detail"] and VERIFY in body["detail"]
    client.post(VERIFY, {"code": current_code(secret)})
    assert client.get("/api/v1/studies/").status_code == 200


def test_the_token_endpoint_needs_the_code_too(cast):
    secret = enrol(cast.alice)
    api = APIClient()
    url = "/api/v1/auth/token/"
    without = api.post(url, {"username": "alice", "password": PASSWORD}, format="json")
    assert without.status_code == 400 and "otp_code" in without.json()["fields"]
    wrong = api.post(url, {"username": "alice", "password": PASSWORD, "otp_code": wrong_code(secret)}, format="json")
    assert wrong.status_code == 400 and "That code is not right" in wrong.json()["fields"]["otp_code"][0]
    unthrottle()
    made = api.post(url, {"username": "alice", "password": PASSWORD, "otp_code": current_code(secret)}, format="json")
    assert made.status_code == 201 and made.json()["token"]
    # Without two-factor sign-in, the password alone, as before.
    assert api.post(url, {"username": "bob", "password": PASSWORD}, format="json").status_code == 201


def test_the_token_endpoint_refuses_staff_who_have_not_set_it_up(cast):
    cast.charlie.is_staff = True
    cast.charlie.save(update_fields=["is_staff"])
    response = APIClient().post("/api/v1/auth/token/", {"username": "charlie", "password": PASSWORD}, format="json")
    assert response.status_code == 403 and "must set up two-factor sign-in" in response.json()["detail"]


def test_the_token_endpoint_shares_the_code_lock_out(cast, settings):
    settings.TWO_FACTOR_FAILURE_LIMIT = 2
    settings.OTP_TOTP_THROTTLE_FACTOR = 0
    secret = enrol(cast.alice)
    api = APIClient()
    for _ in range(2):
        api.post("/api/v1/auth/token/", {"username": "alice", "password": PASSWORD, "otp_code": wrong_code(secret)})
    locked = api.post(
        "/api/v1/auth/token/", {"username": "alice", "password": PASSWORD, "otp_code": current_code(secret)}
    )
    assert locked.status_code == 429 and "Too many wrong codes for this account" in locked.json()["detail"]
    assert sign_in("alice").post(VERIFY, {"code": current_code(secret)}).status_code == 429


# --- the admin ---------------------------------------------------------------------------


def test_the_admin_needs_a_verified_session(cast):
    User = get_user_model()
    root = User.objects.create_superuser(username="root", password=PASSWORD)
    secret = enrol(root)
    client = Client()
    # The admin's own login form signs in too; the code is still asked.
    response = client.post("/admin/login/?next=/admin/", {"username": "root", "password": PASSWORD})
    assert response.status_code == 302
    admin = client.get("/admin/")
    assert admin.status_code == 302 and admin["Location"].startswith(VERIFY)
    client.post(VERIFY, {"code": current_code(secret)})
    index = client.get("/admin/")
    assert index.status_code == 200 and "Site administration" in index.content.decode()


def test_the_admin_refuses_an_unverified_session_even_without_the_middleware(cast, settings):
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if m != "accounts.otp.middleware.TwoFactorMiddleware"]
    User = get_user_model()
    root = User.objects.create_superuser(username="root", password=PASSWORD)
    enrol(root)
    client = Client()
    client.force_login(root)
    response = client.get("/admin/")
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")


def test_the_code_page_sends_on_whoever_has_nothing_to_verify(cast):
    anonymous = Client().get(VERIFY)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith(reverse("login"))
    free = sign_in("alice")
    assert free.get(VERIFY + "?next=/accounts/tokens/")["Location"] == "/accounts/tokens/"
    assert free.get(reverse("home")).status_code == 200 and free.get("/api/v1/studies/").status_code == 200
