"""The header's unread count, the notifications page, the preferences page
and the API, each scoped to the person signed in."""

import json

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from notifications.models import Notification, NotificationPreference


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def api_for(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def notes(cast):
    """Three notifications for bob (two unread), one for carol."""
    made = {
        "bob_old": Notification.objects.create(recipient=cast.bob, kind="run.succeeded", text="Old news.", link="/"),
        "bob_new": Notification.objects.create(
            recipient=cast.bob, kind="phase.changed", text="Voting opened.", link="/studies/1/"
        ),
        "bob_read": Notification.objects.create(recipient=cast.bob, kind="round.opened", text="Read one.", link="/"),
        "carol": Notification.objects.create(
            recipient=cast.carol, kind="reminder.sent", text="Carol's secret reminder.", link="/"
        ),
    }
    Notification.objects.filter(pk=made["bob_read"].pk).update(read_at="2026-01-01T00:00:00Z")
    return made


def test_the_header_shows_the_unread_count_with_one_query(cast, notes) -> None:
    page = client_for(cast.bob).get("/notifications/").content.decode()
    assert '<span class="notifications-link__count" id="unread-count">2</span>' in page
    assert 'id="notifications-link" href="/notifications/" aria-current="page"' in page
    with CaptureQueriesContext(connection) as queries:
        client_for(cast.charlie).get("/accounts/email/")
    counting = [q["sql"] for q in queries.captured_queries if "notifications_notification" in q["sql"]]
    assert len(counting) == 1 and "COUNT(" in counting[0].upper()
    page = client_for(cast.charlie).get("/accounts/email/").content.decode()
    assert 'id="notifications-link"' in page and 'id="unread-count"' not in page  # none unread: no number


def test_a_signed_out_page_runs_no_count(db) -> None:
    with CaptureQueriesContext(connection) as queries:
        page = Client().get("/accounts/login/").content.decode()
    assert 'id="notifications-link"' not in page
    assert not [q for q in queries.captured_queries if "notifications_notification" in q["sql"]]


def test_the_list_shows_only_ones_own_notifications(cast, notes) -> None:
    page = client_for(cast.bob).get("/notifications/").content.decode()
    assert page.index("Read one.") < page.index("Voting opened.") < page.index("Old news.")  # newest first
    assert "Carol&#x27;s secret reminder." not in page and "Carol's secret" not in page
    assert page.count("notification--unread") == 2


def test_marking_read_one_all_and_not_anothers(cast, notes) -> None:
    bob = client_for(cast.bob)
    # Another's notification is a 404, and stays unread.
    assert bob.post(f"/notifications/{notes['carol'].pk}/read/").status_code == 404
    assert Notification.objects.get(pk=notes["carol"].pk).read_at is None
    response = bob.post(f"/notifications/{notes['bob_new'].pk}/read/", {"open": "1"})
    assert response.status_code == 302 and response["Location"] == "/studies/1/"
    assert Notification.objects.get(pk=notes["bob_new"].pk).read_at is not None
    assert bob.get(f"/notifications/{notes['bob_old'].pk}/read/").status_code == 405  # GET never marks
    bob.post("/notifications/read/")
    assert not Notification.objects.filter(recipient=cast.bob, read_at__isnull=True).exists()
    assert Notification.objects.get(pk=notes["carol"].pk).read_at is None


def test_marking_read_needs_the_csrf_token(cast, notes) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(cast.bob)
    assert client.post("/notifications/read/").status_code == 403
    assert Notification.objects.filter(recipient=cast.bob, read_at__isnull=True).count() == 2


def test_a_link_elsewhere_is_never_followed(cast) -> None:
    sneaky = Notification.objects.create(recipient=cast.bob, kind="run.failed", text="x", link="//evil.example/")
    response = client_for(cast.bob).post(f"/notifications/{sneaky.pk}/read/", {"open": "1"})
    assert response["Location"] == "/"


def test_the_preferences_page_saves_each_kind_and_the_digest(cast) -> None:
    client = client_for(cast.bob)
    page = client.get("/accounts/notifications/").content.decode()
    assert 'href="/accounts/notifications/" aria-current="page">Notifications</a>' in page
    assert 'id="no-email"' in page  # bob has no address: said
    form = dict.fromkeys(("invitation.created", "round.opened", "round.closed", "reminder.sent"), "on")
    response = client.post("/accounts/notifications/", {**form, "digest": "on"}, follow=True)
    assert "Your notification preferences are saved." in response.content.decode()
    preference = NotificationPreference.objects.get(user=cast.bob)
    assert preference.digest is True
    assert preference.email_off == [
        "phase.changed",
        "expert.excluded",
        "run.succeeded",
        "run.failed",
        "analysis.finished",
    ]
    page = client.get("/accounts/notifications/").content.decode()
    assert 'name="round.opened" id="id_round.opened" checked' in page
    assert 'name="run.failed" id="id_run.failed" checked' not in page


def test_the_preferences_page_needs_signing_in(db) -> None:
    response = Client().get("/accounts/notifications/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


# --- API ------------------------------------------------------------------------------------------


def test_the_api_lists_only_ones_own(cast, notes) -> None:
    body = api_for(cast.bob).get("/api/v1/notifications/").json()
    assert body["count"] == 3
    assert [n["text"] for n in body["results"]] == ["Read one.", "Voting opened.", "Old news."]
    assert body["results"][1] | {"created_at": None} == {
        "id": notes["bob_new"].pk,
        "kind": "phase.changed",
        "study": None,
        "study_title": None,
        "text": "Voting opened.",
        "link": "/studies/1/",
        "created_at": None,
        "read": False,
        "read_at": None,
        "email": "none",
    }
    assert APIClient().get("/api/v1/notifications/").status_code in (401, 403)


def test_the_api_marks_read(cast, notes) -> None:
    api = api_for(cast.bob)
    assert api.post(f"/api/v1/notifications/{notes['carol'].pk}/read/").status_code == 404
    one = api.post(f"/api/v1/notifications/{notes['bob_new'].pk}/read/").json()
    assert one["read"] is True and one["id"] == notes["bob_new"].pk
    marked = api.post("/api/v1/notifications/read/", {"ids": [notes["bob_old"].pk, notes["carol"].pk]}, format="json")
    assert marked.json() == {"marked": 1, "unread": 0}
    assert Notification.objects.get(pk=notes["carol"].pk).read_at is None
    assert api.post("/api/v1/notifications/read/", {"id": 1}, format="json").status_code == 400


def test_the_api_reads_and_replaces_the_preferences(cast) -> None:
    api = api_for(cast.bob)
    got = api.get("/api/v1/notifications/preferences/").json()
    assert got["email_off"] == [] and got["digest"] is False and "run.failed" in got["kinds"]
    put = api.put("/api/v1/notifications/preferences/", {"email_off": ["run.failed"], "digest": True}, format="json")
    assert put.status_code == 200 and put.json()["email_off"] == ["run.failed"] and put.json()["digest"] is True
    bad = api.put("/api/v1/notifications/preferences/", {"email_off": ["nope"], "digest": True}, format="json")
    assert bad.status_code == 400 and "email_off" in json.dumps(bad.json())
    assert NotificationPreference.objects.get(user=cast.bob).email_off == ["run.failed"]
    assert api.put("/api/v1/notifications/preferences/", {"digest": True}, format="json").status_code == 400
