"""Self sign-up on the real stack: the mails through a real SMTP server the
test starts (aiosmtpd), read back as it received them; the mail task in a
real Celery worker on Redis and PostgreSQL; and two sign-ups racing on
PostgreSQL (the same link twice, one username for two links) making one
account. The first test runs with the embedded defaults too (an eager
task); the others need DATABASE_URL (PostgreSQL) and REDIS_URL, as .ci/run
sets them, and are skipped without, for that stated reason."""

import re
import threading

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from accounts import signup, tasks
from accounts.models import SignUpRequest, SitePolicy
from tests.realstack_support import POSTGRES_AND_REDIS, worker_taking
from workspace.errors import InvalidInput
from workspace.models import EmailConfirmation

PASSWORD = "a-fresh-passphrase-31"
LINK = re.compile(r"http://testserver/accounts/signup/([A-Za-z0-9_-]{20,})/")

pytestmark = pytest.mark.realstack


def open_policy() -> None:
    policy = SitePolicy.current()
    policy.signup = SitePolicy.SignUp.OPEN
    policy.save()


def parts(message) -> tuple[str, str]:
    assert message.get_content_type() == "multipart/alternative"
    return (
        message.get_body(preferencelist=("plain",)).get_content(),
        message.get_body(preferencelist=("html",)).get_content(),
    )


@pytest.mark.django_db
def test_the_sign_up_mails_through_a_real_smtp_server(
    smtp_server, settings, eager_celery, django_capture_on_commit_callbacks, cast
) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", smtp_server.port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    open_policy()
    cast.alice.email = "alice@example.org"
    cast.alice.save()
    for address in ("alice@example.org", "newcomer@example.org"):
        with django_capture_on_commit_callbacks(execute=True):
            assert Client().post("/accounts/signup/", {"email": address}).status_code == 200
    smtp_server.inbox.wait(2, timeout=10)
    received = {tuple(rcpt): message for rcpt, message in smtp_server.inbox.messages}
    exists_plain, exists_html = parts(received[("alice@example.org",)])
    assert received[("alice@example.org",)]["Subject"] == "You already have an account on approve"
    assert "http://testserver/accounts/password/reset/" in exists_plain
    assert 'href="http://testserver/accounts/login/"' in exists_html
    assert not LINK.search(exists_plain) and not LINK.search(exists_html)
    plain, html = parts(received[("newcomer@example.org",)])
    token = LINK.search(plain).group(1)
    assert f'href="http://testserver/accounts/signup/{token}/"' in html
    client = Client()
    done = client.post(
        f"/accounts/signup/{token}/", {"username": "newcomer", "password": PASSWORD, "password_again": PASSWORD}
    )
    assert done.status_code == 302
    assert EmailConfirmation.objects.get(user__username="newcomer").email == "newcomer@example.org"


@POSTGRES_AND_REDIS
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_mails_the_sign_up_link(smtp_server, tmp_path, monkeypatch) -> None:
    log_path = tmp_path / "worker.log"
    env = {"EMAIL_URL": f"smtp://127.0.0.1:{smtp_server.port}"}
    with worker_taking(tasks, "signup_mail_send", log_path=log_path, monkeypatch=monkeypatch, env=env):
        open_policy()
        response = Client().post("/api/v1/accounts/signup/", {"email": "worker@example.org"}, "application/json")
        assert response.status_code == 202
        smtp_server.inbox.wait(1, timeout=60, logs=log_path.read_text)
        ((recipients, message),) = smtp_server.inbox.messages
        assert recipients == ["worker@example.org"]
        plain, _ = parts(message)
        token = LINK.search(plain).group(1)
        # The worker wrote the request; the token never crossed the broker (only the address did).
        assert SignUpRequest.objects.get().email == "worker@example.org"
        user = signup.signup_complete(token=token, username="worker", password=PASSWORD)
        assert user.email == "worker@example.org"


def _race(calls) -> list[object]:
    """Run each call in its own thread and connection, released together."""
    barrier = threading.Barrier(len(calls))
    results: list[object] = [None] * len(calls)

    def run(index, call):
        try:
            barrier.wait()
            results[index] = call()
        except Exception as error:  # noqa: BLE001 (the outcome under test)
            results[index] = error
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(index, call)) for index, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


def _link(email: str) -> str:
    token = signup.signup_link_make(email=email)
    assert token is not None
    return token


@POSTGRES_AND_REDIS
@pytest.mark.django_db(transaction=True)
def test_one_link_posted_twice_at_once_makes_one_account() -> None:
    open_policy()
    token = _link("twice@example.org")
    results = _race(
        [
            lambda: signup.signup_complete(token=token, username="twice-a", password=PASSWORD),
            lambda: signup.signup_complete(token=token, username="twice-b", password=PASSWORD),
        ]
    )
    made = [result for result in results if isinstance(result, User)]
    refused = [result for result in results if isinstance(result, InvalidInput)]
    assert len(made) == 1 and len(refused) == 1, results
    assert refused[0].errors == {"token": [signup.USED_LINK]}
    assert User.objects.filter(email="twice@example.org").count() == 1


@POSTGRES_AND_REDIS
@pytest.mark.django_db(transaction=True)
def test_two_links_racing_for_one_username_make_one_account() -> None:
    open_policy()
    first, second = _link("one@example.org"), _link("two@example.org")
    results = _race(
        [
            lambda: signup.signup_complete(token=first, username="contested", password=PASSWORD),
            lambda: signup.signup_complete(token=second, username="Contested", password=PASSWORD),
        ]
    )
    made = [result for result in results if isinstance(result, User)]
    refused = [result for result in results if isinstance(result, InvalidInput)]
    assert len(made) == 1 and len(refused) == 1, results
    assert list(refused[0].errors) == ["username"]
    assert User.objects.filter(username__iexact="contested").count() == 1
    # The loser's link is still good for another name.
    loser = second if made[0].email == "one@example.org" else first
    assert signup.signup_complete(token=loser, username="uncontested", password=PASSWORD)
