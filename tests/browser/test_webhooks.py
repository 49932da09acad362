"""The webhooks pages in a browser (docs/pages.md, "Webhooks"): the
designer registers a webhook to a receiver the test starts, copies the
secret shown once, sends a test delivery that the receiver verifies, reads
it in the log, and deletes the webhook after the confirmation; every page
fits a 390 px phone and passes axe, with a long URL and a long error."""

import pytest
from playwright.sync_api import Browser, Page, expect
from pytest_django.live_server_helper import LiveServer

from tests.browser.support import TIMEOUT_MS, assert_accessible, axe_violations, describe_violations, login, screenshot
from tests.fixtures import PASSWORD
from tests.webhooks.conftest import running_receiver
from tracking.secrets import seal
from webhooks import services
from webhooks.models import SECRET_SEAL_INFO, Delivery, Webhook

PHONE = {"width": 390, "height": 844}


@pytest.fixture
def receiver(settings):
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    with running_receiver() as state:
        yield state


def test_register_test_read_the_log_and_delete(page: Page, demo, receiver) -> None:
    login(page, demo.designer, PASSWORD)
    page.goto(f"/studies/{demo.study.pk}/")
    page.get_by_role("navigation", name="Study").get_by_role("link", name="Webhooks", exact=True).click()
    expect(page.locator("#no-webhooks")).to_be_visible()
    page.get_by_label("URL").fill(receiver.url("/approve"))
    page.get_by_label("A validation run failed (run.failed)").uncheck()
    page.get_by_role("button", name="Register").click()
    secret = page.locator("#webhook-secret").input_value()
    webhook = Webhook.objects.get()
    assert secret == webhook.secret and "run.failed" not in webhook.events
    assert_accessible(page)
    screenshot(page, "webhooks-registered")
    receiver.secret = secret
    page.get_by_role("link", name=receiver.url("/approve")).click()
    expect(page.locator("#webhook-secret")).to_have_count(0)  # shown once only
    page.get_by_role("button", name="Send a test delivery").click()
    expect(page.locator(".messages")).to_contain_text("A test delivery is on its way")
    (got,) = receiver.wait(1)
    assert got.verified and got.headers["X-Approve-Event"] == "webhook.test"
    page.reload()
    row = page.locator("#deliveries tbody tr").first
    expect(row).to_contain_text("webhook.test")
    expect(row).to_contain_text("Succeeded")
    expect(row).to_contain_text("200")
    assert_accessible(page)
    page.get_by_role("link", name="Delete…").click()
    expect(page.get_by_role("heading", level=2)).to_contain_text("Delete the webhook to")
    assert Webhook.objects.exists()
    page.get_by_role("button", name="Delete webhook").click()
    expect(page.locator("#no-webhooks")).to_be_visible()
    assert not Webhook.objects.exists()


def test_the_webhooks_pages_fit_a_phone(browser: Browser, live_server: LiveServer, demo) -> None:
    long_url = "https://hooks.internal.example.org/" + "/".join(["a-rather-long-path-segment"] * 8) + "?token=x"
    webhook = Webhook.objects.create(
        study=demo.study, url=long_url, events=["run.succeeded"], sealed_secret=seal("s", info=SECRET_SEAL_INFO)
    )
    services.event_record(webhooks=[webhook] * 3, kind="run.succeeded", data={}, at=webhook.created_at)
    Delivery.objects.update(status="failed", attempts=6, error="ConnectionRefusedError: " + "x" * 300)
    context = browser.new_context(base_url=live_server.url, viewport=PHONE, locale="en-GB")
    context.set_default_timeout(TIMEOUT_MS)
    phone = context.new_page()
    try:
        login(phone, demo.designer, PASSWORD)
        base = f"/studies/{demo.study.pk}/webhooks/"
        problems = []
        for number, path in enumerate((base, f"{base}{webhook.pk}/", f"{base}{webhook.pk}/delete/"), start=1):
            response = phone.goto(path)
            assert response is not None and response.status == 200, path
            width = phone.evaluate("document.documentElement.scrollWidth")
            if width > PHONE["width"]:
                problems.append(f"{path}: {width} px wide")
            violations = axe_violations(phone)
            if violations:
                problems.append(f"{path}:\n{describe_violations(violations)}")
            screenshot(phone, f"phone-webhooks-{number:02d}")
        assert not problems, "\n".join(problems)
    finally:
        context.close()
