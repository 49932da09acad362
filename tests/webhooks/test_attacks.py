"""The webhooks' surface attacked (docs/webhooks.md, "Threat model"):
SSRF (loopback, private, link-local addresses, refused at registration and
at every delivery, DNS rebinding between the two, no redirect), and data
leakage (no invitation key, e-mail address, expert's name or answers in any
delivery; the events about persons are never sent)."""

import socket

import pytest

from tracking import remote
from tracking.secrets import seal
from webhooks import outbound, payloads, services, tasks
from webhooks.models import SECRET_SEAL_INFO, Delivery, Webhook
from workspace import events, invitations, reminders
from workspace import services as workspace_services
from workspace.errors import InvalidInput
from workspace.models import Phase

from .conftest import SITE

ALL = list(payloads.SUBSCRIBABLE)


@pytest.fixture
def default_policy(settings):
    """A deployment's defaults: no WEBHOOK_ALLOWED_HOSTS, DEBUG off."""
    settings.WEBHOOK_ALLOWED_HOSTS = []
    settings.DEBUG = False


def fake_dns(monkeypatch, *addresses):
    """Every name resolves to ``addresses``; returns the names looked up."""
    looked_up: list[str] = []

    def resolve(host, port, *args, **kwargs):
        looked_up.append(host)
        family = {True: socket.AF_INET6, False: socket.AF_INET}
        return [(family[":" in a], socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]

    monkeypatch.setattr(remote.socket, "getaddrinfo", resolve)
    return looked_up


def refusal(study, url) -> str:
    with pytest.raises(InvalidInput) as refused:
        services.webhook_create(study=study, by=study.designer, url=url, events=ALL)
    assert not Webhook.objects.exists()
    (message,) = refused.value.errors["url"]
    return message


@pytest.mark.usefixtures("default_policy")
def test_internal_addresses_are_refused_at_registration_naming_the_url(make_study, monkeypatch):
    study = make_study(Phase.DRAFT).study
    assert refusal(study, "https://127.0.0.1:8443/hook").startswith("127.0.0.1 is a loopback address")
    assert refusal(study, "https://10.1.2.3/").startswith("10.1.2.3 is a private address")
    metadata = refusal(study, "https://169.254.169.254/latest/meta-data")
    assert metadata.startswith("169.254.169.254 is a link-local address") and "WEBHOOK_ALLOWED_HOSTS" in metadata
    assert refusal(study, "https://[::1]/").startswith("::1 is a loopback address")
    assert refusal(study, "https://[::ffff:192.168.1.1]/").startswith("::ffff:192.168.1.1 is a private address")
    assert refusal(study, "https://0.0.0.0/").startswith("0.0.0.0 is a")
    # Spellings two parsers could read differently: refused by shape.
    for odd in (
        "https://127.1/",
        "https://2130706433/",
        "https://0x7f.0.0.1/",
        "https://user@hooks.example.com/",
        "https://hooks.example.com\\@10.0.0.1/",
        "https://hooks.example.com/a#frag",
        "https://Hooks.Example.com/",
        "https://hooks.example.com/a b",
        "ftp://hooks.example.com/",
        "https://hooks.example.com/%zz",
        "javascript:alert(1)",
        "",
    ):
        assert refusal(study, odd) == outbound.SHAPE, odd
    # A name resolving to an internal address: refused in the same words whatever it is.
    for internal in ("192.168.0.7", "127.0.0.1", "169.254.169.254", "::1", "64:ff9b::a00:1"):
        fake_dns(monkeypatch, "93.184.216.34", internal)
        assert refusal(study, "https://hooks.example.com/x") == outbound.UNREACHABLE, internal


@pytest.mark.usefixtures("default_policy")
def test_plain_http_only_to_a_host_the_operator_lists(make_study, monkeypatch, settings):
    study = make_study(Phase.DRAFT).study
    fake_dns(monkeypatch, "93.184.216.34")
    assert refusal(study, "http://hooks.example.com/x") == outbound.PLAIN_HTTP
    # Public and https: registered, with Slack's and Teams' URL shapes.
    for url in (
        "https://hooks.slack.com/services/T000/B000/XXXX",
        "https://contoso.webhook.office.com/webhookb2/a-b@c-d/IncomingWebhook/0f/e-f",
        "https://prod-1.westus.logic.azure.com:443/workflows/abc/triggers/manual/paths/invoke?api-version=2016-06-01"
        "&sp=%2Ftriggers%2Fmanual%2Frun&sig=x",
    ):
        services.webhook_create(study=study, by=None, url=url, events=["run.succeeded"])
    settings.WEBHOOK_ALLOWED_HOSTS = ["hooks.internal"]
    services.webhook_create(study=study, by=None, url="http://hooks.internal:8080/x", events=["run.succeeded"])


def test_with_allowed_hosts_only_those(make_study, settings):
    settings.WEBHOOK_ALLOWED_HOSTS = ["hooks.internal", ".corp.example"]
    study = make_study(Phase.DRAFT).study
    for url in ("https://evil.example/", "http://127.0.0.1:8610/", "https://hooks.internal.evil/"):
        host = url.split("//")[1].split("/")[0].split(":")[0]
        assert refusal(study, url) == f"{host} is not among the hosts this server may contact (WEBHOOK_ALLOWED_HOSTS)"


def test_tracking_keeps_its_own_setting(settings):
    """One policy each: a host listed for webhooks is not one for MLflow."""
    settings.WEBHOOK_ALLOWED_HOSTS, settings.TRACKING_ALLOWED_HOSTS = ["hooks.internal"], ["mlflow.internal"]
    with pytest.raises(InvalidInput) as refused:
        remote.check_host("http://hooks.internal:5000")
    assert "TRACKING_ALLOWED_HOSTS" in refused.value.errors["tracking_uri"][0]
    with pytest.raises(InvalidInput):
        outbound.check("http://mlflow.internal:5000/")


def test_dns_rebinding_a_host_public_at_registration_is_refused_at_delivery(
    make_study, receiver, settings, monkeypatch, after_commit
):
    """Public when registered, the name resolves to an internal address at
    delivery: nothing is connected to, the delivery fails saying why."""
    built = make_study(Phase.DRAFT)
    settings.WEBHOOK_ALLOWED_HOSTS = []
    fake_dns(monkeypatch, "93.184.216.34")
    webhook = services.webhook_create(study=built.study, by=None, url="https://hooks.example.com/x", events=ALL)
    connected = []
    monkeypatch.setattr(remote, "_connect", lambda *args: connected.append(args))
    for internal in ("127.0.0.1", "10.0.0.7", "169.254.169.254"):
        fake_dns(monkeypatch, internal)
        services.event_record(webhooks=[webhook], kind="round.opened", data={}, at=built.study.created_at)
        delivery = Delivery.objects.get(status="pending")
        with after_commit():
            tasks.delivery_send.delay(delivery_id=delivery.pk)
        delivery.refresh_from_db()
        assert (delivery.status, delivery.status_code) == ("failed", None), internal
        assert delivery.error == f"refused: {outbound.UNREACHABLE}"
    assert connected == [] and receiver.received == []


def test_a_stored_url_no_longer_allowed_is_refused_at_delivery(make_study, receiver, settings, after_commit):
    built = make_study(Phase.DRAFT)
    webhook = Webhook.objects.create(
        study=built.study, url=receiver.url(), events=ALL, sealed_secret=seal("s", info=SECRET_SEAL_INFO)
    )
    settings.WEBHOOK_ALLOWED_HOSTS = []  # the operator took 127.0.0.1 off the list
    with after_commit():
        workspace_services.study_open_voting(study=built.study)
    delivery = Delivery.objects.get(webhook=webhook)
    assert (delivery.status, delivery.attempts) == ("failed", 1)  # a refusal is not retried
    assert delivery.error.startswith("refused: 127.0.0.1 is a loopback address")
    assert receiver.received == []


def test_the_checked_address_is_the_one_connected(make_study, receiver, settings, monkeypatch, after_commit):
    """An allowed name is resolved once per attempt and that address is
    connected; the name is sent as Host."""
    settings.WEBHOOK_ALLOWED_HOSTS = ["hooks.test"]
    looked_up = fake_dns(monkeypatch, "127.0.0.1")
    built = make_study(Phase.DRAFT)
    webhook = services.webhook_create(
        study=built.study, by=None, url=f"http://hooks.test:{receiver.port}/in", events=ALL
    )
    receiver.secret = webhook.secret
    looked_up.clear()
    with after_commit():
        workspace_services.study_open_voting(study=built.study)
    (got,) = receiver.wait(1)
    assert got.verified and got.headers["Host"] == f"hooks.test:{receiver.port}" and got.path == "/in"
    assert looked_up == ["hooks.test"]


# --- data leakage ---------------------------------------------------------------------


def test_events_about_persons_are_never_delivered_nor_subscribable(
    make_study, cast, receiver, after_commit, monkeypatch
):
    cast.bob.email, cast.carol.email = "bob@example.org", "carol@example.org"
    cast.bob.save()
    cast.carol.save()
    built = make_study(Phase.DRAFT)
    webhook = services.webhook_create(study=built.study, by=None, url=receiver.url(), events=ALL)
    enqueued = []
    monkeypatch.setattr(tasks.event_deliver, "delay", lambda **kwargs: enqueued.append(kwargs))
    with after_commit():
        invitations.invitation_create(study=built.study, created_by=cast.alice, username="charlie")
        _, key = invitations.invitation_create(study=built.study, created_by=cast.alice)
        # As single sign-on publishes it: an address and the link's key.
        events.event_publish(
            "invitation.created", study_id=built.study.pk, invitation_id=1, email="dan@example.org", key="K3Y-secret"
        )
    with after_commit():
        workspace_services.study_open_voting(study=built.study)
    with after_commit():
        reminders.reminders_send(study=built.study, experts=[built.bob], link=f"{SITE}/", note="Friday, Bob.")
        workspace_services.expert_absence_set(
            study=built.study, expert=built.carol, absence="excluded", reason="conflict", acting=cast.alice
        )
    # Only the phase change was enqueued and delivered.
    assert [call["kind"] for call in enqueued] == ["phase.changed"]
    for kind in ("invitation.created", "reminder.sent", "expert.excluded"):
        with pytest.raises(InvalidInput) as refused:
            services.webhook_update(webhook=webhook, events=[kind])
        assert refused.value.errors["events"][0].startswith(f"not an event a webhook may receive: {kind}")


def test_no_key_address_or_name_in_any_payload_even_if_an_event_carried_them(make_study, receiver):
    """The data is a list of fields per kind: whatever else an event holds
    (a future change adding a name, a key) stays out of the delivery."""
    built = make_study(Phase.DRAFT)
    webhook = services.webhook_create(study=built.study, by=None, url=receiver.url(), events=ALL)
    leaky = {
        "key": "K3Y-secret",
        "email": "bob@example.org",
        "username": "bob",
        "user_id": 7,
        "membership_ids": [1],
        "note": "Bob still owes his ranges",
        "reason": "carol's conflict",
        "answers": {"bob": [0.5]},
        "from": "draft",
        "to": "voting",
        "number": True,  # a bool is not a number here
        "round_id": "1; drop",  # not an int: dropped
        "status": "x" * 500,
    }
    for kind in ALL:
        services.event_record(webhooks=[webhook], kind=kind, data=leaky, at=built.study.created_at)
    for delivery in Delivery.objects.all():
        text = payloads.body(delivery.payload).decode()
        for secret in ("K3Y", "@example.org", "bob", "Bob", "carol", "drop", "owes", "user_id", "membership"):
            assert secret not in text, (delivery.event, secret)
        assert set(delivery.payload["data"]) <= set(payloads.FIELDS[delivery.event]) | {"run_url", "analysis_url"}
        assert all(len(str(value)) <= 200 for value in delivery.payload["data"].values())
    phase = Delivery.objects.get(event="phase.changed").payload["data"]
    assert phase == {"from": "draft", "to": "voting"}


def test_a_study_title_cannot_ping_a_channel_in_the_chat_text(make_study):
    built = make_study(Phase.DRAFT)
    built.study.title = "<!channel> & <https://evil.example|click>"
    document = payloads.payload(
        delivery_id="d",
        kind="phase.changed",
        study=built.study,
        data={"from": "draft", "to": "voting"},
        at=built.study.created_at,
    )
    assert (
        "<" not in document["text"] and "&lt;!channel&gt; &amp; &lt;https://evil.example|click&gt;" in document["text"]
    )
    assert document["study"]["title"] == built.study.title  # the JSON field as it is
