"""Which hosts approve contacts for a study's MLflow server (SSRF):
TRACKING_ALLOWED_HOSTS, else only public addresses (loopback too with
DEBUG). A refusal names ``tracking_uri`` and writes nothing."""

import socket

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from tracking import remote, services
from tracking.models import MlflowConnection
from tracking.remote import TrackerError
from workspace.errors import InvalidInput
from workspace.models import Phase

from .conftest import free_port


@pytest.fixture
def default_policy(settings):
    settings.TRACKING_ALLOWED_HOSTS = []
    settings.DEBUG = False


def refusal(uri: str) -> str:
    with pytest.raises(InvalidInput) as refused:
        remote.check_host(uri)
    (message,) = refused.value.errors["tracking_uri"]
    return message


def fake_addresses(monkeypatch, *addresses):
    def resolve(host, port, *args, **kwargs):
        family = {True: socket.AF_INET6, False: socket.AF_INET}
        return [(family[":" in a], socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]

    monkeypatch.setattr(remote.socket, "getaddrinfo", resolve)


@pytest.mark.usefixtures("default_policy")
def test_by_default_internal_addresses_are_refused_by_kind():
    assert refusal("http://127.0.0.1:5000").startswith("127.0.0.1 is a loopback address (127.0.0.1): ")
    assert "TRACKING_ALLOWED_HOSTS" in refusal("http://127.0.0.1:5000")
    assert refusal("http://10.1.2.3").startswith("10.1.2.3 is a private address (10.1.2.3)")
    assert refusal("http://169.254.169.254/latest").startswith("169.254.169.254 is a link-local address")
    assert refusal("https://[::1]:8443").startswith("::1 is a loopback address (::1)")
    assert refusal("http://0.0.0.0").startswith("0.0.0.0 is a")
    assert refusal("http://[::ffff:192.168.1.1]").startswith("::ffff:192.168.1.1 is a private address")
    assert refusal("http://h:99999") == "the port must be a number from 1 to 65535"


@pytest.mark.usefixtures("default_policy")
def test_by_default_a_name_is_judged_by_every_address_it_resolves_to(monkeypatch):
    fake_addresses(monkeypatch, "93.184.216.34")
    remote.check_host("https://mlflow.example.com")  # public: allowed
    # One address not public: refused in the words of an unreachable server,
    # so that no answer tells what an internal name resolves to.
    for internal in ("192.168.0.7", "127.0.0.1", "::1", "::ffff:10.0.0.1", "64:ff9b::a00:1", "2002:7f00:1::1"):
        fake_addresses(monkeypatch, "93.184.216.34", internal)
        with pytest.raises(TrackerError) as refused:
            remote.check_host("https://mlflow.example.com")
        assert (str(refused.value), refused.value.code) == (remote.UNREACHABLE, "mlflow_unreachable"), internal


def test_with_debug_loopback_is_allowed_and_private_still_refused(settings):
    settings.TRACKING_ALLOWED_HOSTS, settings.DEBUG = [], True
    remote.check_host("http://127.0.0.1:5000")
    remote.check_host("http://localhost:5000")
    assert refusal("http://10.0.0.5").startswith("10.0.0.5 is a private address")


def test_the_allowed_hosts_exactly_or_by_suffix(settings, monkeypatch):
    settings.TRACKING_ALLOWED_HOSTS = ["MLflow.internal", ".corp.example"]
    fake_addresses(monkeypatch, "10.0.0.9")  # listed hosts are the operator's choice, whatever their address
    for allowed in ("http://mlflow.internal:5000", "https://a.b.corp.example", "http://corp.example"):
        remote.check_host(allowed)
    for refused in ("http://evil.example", "http://notcorp.example", "http://mlflow.internal.evil", "http://10.0.0.9"):
        host = refused.split("//")[1].split(":")[0]
        assert refusal(refused) == f"{host} is not among the hosts this server may contact (TRACKING_ALLOWED_HOSTS)"


@pytest.mark.usefixtures("default_policy")
def test_the_page_and_the_api_name_the_refusal_and_write_nothing(make_study, cast):
    study = make_study(Phase.DRAFT).study
    uri = f"http://127.0.0.1:{free_port()}"
    browser = Client()
    browser.force_login(cast.alice)
    answer = browser.post(f"/studies/{study.pk}/mlflow/connection/", {"tracking_uri": uri})
    assert answer.status_code == 200
    assert "127.0.0.1 is a loopback address (127.0.0.1)" in answer.content.decode()
    api = APIClient()
    api.force_authenticate(cast.alice)
    answer = api.put(f"/api/v1/studies/{study.pk}/mlflow/connection/", {"tracking_uri": uri}, format="json")
    assert answer.status_code == 400
    assert answer.json()["fields"]["tracking_uri"][0].startswith("127.0.0.1 is a loopback address")
    assert not MlflowConnection.objects.filter(study=study).exists()


def test_a_stored_connection_is_checked_again_at_each_use(make_study, settings):
    study = make_study(Phase.DRAFT).study
    MlflowConnection.objects.create(study=study, tracking_uri="http://10.0.0.5:5000", checked_at=timezone.now())
    settings.TRACKING_ALLOWED_HOSTS = []
    with pytest.raises(InvalidInput) as refused:
        services.import_preview(study=study, experiment="x")
    assert refused.value.errors["tracking_uri"][0].startswith("10.0.0.5 is a private address")
