"""The webhooks pages (docs/pages.md, "Webhooks"): the designer registers
a webhook (the secret shown on that answer only), changes it, sends a test,
renews the secret, reads the log and deletes after a confirmation; experts
get 403, anyone else 404."""

import re

import pytest
from django.test import Client
from django.utils.html import escape

from webhooks import payloads, services
from webhooks.models import Delivery, Webhook
from workspace.models import Phase

ALL = list(payloads.SUBSCRIBABLE)


def browser(user):
    client = Client()
    client.force_login(user, backend="django.contrib.auth.backends.ModelBackend")
    return client


@pytest.fixture
def study(make_study):
    return make_study(Phase.DRAFT).study


def secret_on(html: str) -> str | None:
    found = re.search(r'id="webhook-secret" class="input--mono" value="([^"]+)"', html)
    return found.group(1) if found else None


def test_registering_shows_the_secret_once(study, cast, receiver):
    alice = browser(cast.alice)
    page = alice.get(f"/studies/{study.pk}/webhooks/")
    html = page.content.decode()
    assert page.status_code == 200 and 'id="no-webhooks"' in html and 'aria-current="page">Webhooks</a>' in html
    for kind, words in payloads.SUBSCRIBABLE.items():  # one box per event, in words, ticked by default
        assert f'value="{kind}"' in html and escape(words[1:]) in html
    assert "invitation.created" not in html and "reminder.sent" not in html
    answer = alice.post(
        f"/studies/{study.pk}/webhooks/",
        {"url": receiver.url(), "events": ["run.succeeded", "run.failed"], "active": "on"},
    )
    webhook = Webhook.objects.get()
    html = answer.content.decode()
    assert answer.status_code == 200 and answer["Cache-Control"] == "no-store"
    assert secret_on(html) == webhook.secret and "shown only this once" in html
    assert webhook.events == ["run.succeeded", "run.failed"] and webhook.active and webhook.created_by == cast.alice
    assert f'href="/studies/{study.pk}/webhooks/{webhook.pk}/">{receiver.url()}</a>' in html
    # Never again: not on the list, nor on the webhook's page.
    for path in (f"/studies/{study.pk}/webhooks/", f"/studies/{study.pk}/webhooks/{webhook.pk}/"):
        again = alice.get(path).content.decode()
        assert webhook.secret not in again and secret_on(again) is None, path


def test_a_refused_url_is_shown_under_the_field_and_nothing_is_written(study, cast, settings):
    settings.WEBHOOK_ALLOWED_HOSTS, settings.DEBUG = [], False
    alice = browser(cast.alice)
    answer = alice.post(f"/studies/{study.pk}/webhooks/", {"url": "https://10.0.0.1/hook", "events": ALL})
    html = answer.content.decode()
    assert answer.status_code == 200 and "10.0.0.1 is a private address" in html
    assert 'class="field field--invalid"' in html and 'value="https://10.0.0.1/hook"' in html
    answer = alice.post(f"/studies/{study.pk}/webhooks/", {"url": "https://hooks.example.com/", "events": []})
    assert "Choose at least one event." in answer.content.decode()
    answer = alice.post(
        f"/studies/{study.pk}/webhooks/", {"url": "https://hooks.example.com/", "events": ["expert.excluded"]}
    )
    assert "Select a valid choice" in answer.content.decode()
    assert not Webhook.objects.exists()


def test_the_limit_is_said_on_the_form(study, cast, receiver, settings):
    settings.WEBHOOK_MAX_PER_STUDY = 1
    alice = browser(cast.alice)
    for _ in range(2):
        answer = alice.post(f"/studies/{study.pk}/webhooks/", {"url": receiver.url(), "events": ALL})
    assert "the most it may have (WEBHOOK_MAX_PER_STUDY)" in answer.content.decode()
    assert Webhook.objects.count() == 1


def test_the_webhook_page_changes_tests_renews_and_logs(study, cast, receiver, django_capture_on_commit_callbacks):
    alice = browser(cast.alice)
    webhook = services.webhook_create(study=study, by=cast.alice, url=receiver.url(), events=ALL)
    path = f"/studies/{study.pk}/webhooks/{webhook.pk}/"
    page = alice.get(path).content.decode()
    assert 'id="no-deliveries"' in page and 'id="send-test"' in page and 'id="rotate-secret"' in page
    # Change: the URL, fewer events, off.
    changed = alice.post(path, {"url": receiver.url("/other"), "events": ["decision.recorded"]})
    assert changed.status_code == 302 and changed["Location"] == path
    webhook.refresh_from_db()
    assert (webhook.url, webhook.events, webhook.active) == (receiver.url("/other"), ["decision.recorded"], False)
    # A new secret: on this answer only, and the test delivery is signed with it.
    renewed = alice.post(f"{path}rotate-secret/")
    webhook.refresh_from_db()
    assert renewed["Cache-Control"] == "no-store" and secret_on(renewed.content.decode()) == webhook.secret
    receiver.secret = webhook.secret
    with django_capture_on_commit_callbacks(execute=True):
        tested = alice.post(f"{path}test/")
    assert tested.status_code == 302
    (got,) = receiver.wait(1)
    assert got.verified and got.path == "/other"  # sent though the webhook is off: a test
    # The log: time, event, status, code, attempts.
    receiver.default = 500
    services.event_record(webhooks=[webhook], kind="round.opened", data={}, at=webhook.created_at)
    Delivery.objects.filter(event="round.opened").update(status="failed", status_code=500, attempts=4, error="boom")
    log = alice.get(path).content.decode()
    rows = re.findall(r'<tr class="delivery delivery--(\w+)">(.*?)</tr>', log, re.S)
    assert [status for status, _ in rows] == ["failed", "succeeded"]  # newest first
    assert "<code>round.opened</code>" in rows[0][1] and ">500<" in rows[0][1] and ">4<" in rows[0][1]
    assert "boom" in rows[0][1] and ">200<" in rows[1][1] and "<code>webhook.test</code>" in rows[1][1]


def test_the_log_is_paginated(study, cast, receiver, settings):
    webhook = services.webhook_create(study=study, by=cast.alice, url=receiver.url(), events=ALL)
    services.event_record(webhooks=[webhook] * 30, kind="round.opened", data={}, at=webhook.created_at)
    alice = browser(cast.alice)
    path = f"/studies/{study.pk}/webhooks/{webhook.pk}/"
    first = alice.get(path).content.decode()
    second = alice.get(f"{path}?page=2").content.decode()
    assert first.count('<tr class="delivery') == 25 and second.count('<tr class="delivery') == 5
    assert "Page 1 of 2" in first and "Delivery log (30)" in first


def test_deleting_asks_for_confirmation_first(study, cast, receiver):
    alice = browser(cast.alice)
    webhook = services.webhook_create(study=study, by=cast.alice, url=receiver.url(), events=ALL)
    services.event_record(webhooks=[webhook], kind="round.opened", data={}, at=webhook.created_at)
    path = f"/studies/{study.pk}/webhooks/{webhook.pk}/delete/"
    asked = alice.get(path)
    html = asked.content.decode()
    assert asked.status_code == 200 and "Delete the webhook to" in html and "(1 delivery)" in html
    assert Webhook.objects.filter(pk=webhook.pk).exists()  # asking deleted nothing
    done = alice.post(path)
    assert done.status_code == 302 and done["Location"] == f"/studies/{study.pk}/webhooks/"
    assert not Webhook.objects.exists() and not Delivery.objects.exists()


def test_experts_get_403_and_others_404_on_every_page(study, cast, receiver, make_study):
    webhook = services.webhook_create(study=study, by=cast.alice, url=receiver.url(), events=ALL)
    base = f"/studies/{study.pk}/webhooks/"
    paths = [
        ("get", base),
        ("post", base),
        ("get", f"{base}{webhook.pk}/"),
        ("post", f"{base}{webhook.pk}/"),
        ("post", f"{base}{webhook.pk}/test/"),
        ("post", f"{base}{webhook.pk}/rotate-secret/"),
        ("get", f"{base}{webhook.pk}/delete/"),
        ("post", f"{base}{webhook.pk}/delete/"),
    ]
    before = (webhook.secret, webhook.url)
    for user, status in ((cast.bob, 403), (cast.charlie, 404)):
        client = browser(user)
        for method, path in paths:
            answer = getattr(client, method)(path, {"url": "http://127.0.0.1:8610/x", "events": ALL})
            assert answer.status_code == status, (user.username, method, path)
            assert webhook.secret not in answer.content.decode()
    # A webhook of another study of alice's, through this study's path: 404.
    other = make_study(Phase.DRAFT, experts=("carol",)).study
    theirs = services.webhook_create(study=other, by=cast.alice, url=receiver.url(), events=ALL)
    assert browser(cast.alice).get(f"{base}{theirs.pk}/").status_code == 404
    assert browser(cast.alice).post(f"{base}{theirs.pk}/delete/").status_code == 404
    webhook.refresh_from_db()
    assert (webhook.secret, webhook.url) == before and Webhook.objects.count() == 2
    assert not Delivery.objects.exists()
    # The tab is the designer's only.
    assert "/webhooks/" not in browser(cast.bob).get(f"/studies/{study.pk}/").content.decode()


def test_signed_out_the_pages_lead_to_the_login(study, cast, receiver):
    webhook = services.webhook_create(study=study, by=cast.alice, url=receiver.url(), events=ALL)
    for path in (f"/studies/{study.pk}/webhooks/", f"/studies/{study.pk}/webhooks/{webhook.pk}/"):
        answer = Client().get(path)
        assert answer.status_code == 302 and answer["Location"].startswith("/accounts/login/?next="), path
    assert Client().post(f"/studies/{study.pk}/webhooks/{webhook.pk}/rotate-secret/").status_code == 302
    assert Webhook.objects.get().secret == webhook.secret
