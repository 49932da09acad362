"""``Location`` on every create (issue 18, item 4): each operation of the
schema that answers 201 or 202 is called here, and its ``Location`` header
must name the API URL of what it made, a GET of which answers 200 for the
creator with that object. The table must cover every such operation of the
schema, so a new create without a row fails here."""

from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile

from accounts import signup
from accounts.models import SitePolicy
from engine import services as engine_services
from tests.fixtures import api_error
from webhooks import services as webhook_services
from workspace import invitations, limits, services
from workspace.models import Phase

from .conftest import PASSWORD, client_with_token
from .test_access import PREDICTIONS

pytestmark = pytest.mark.django_db

API = "/api/v1"
WEBHOOK_URL = "http://127.0.0.1:8619/approve"


@dataclass(frozen=True)
class Create:
    path: str  # as in the schema
    phase: str
    body: Any
    status: int
    fmt: str = "json"
    # the key of the answer that the GET at Location must answer alike
    key: str = "id"


def upload():
    return {"file": SimpleUploadedFile("holdout.csv", PREDICTIONS, content_type="text/csv"), "positive": "spam"}


CREATES = [
    Create("/api/v1/auth/token/", Phase.DRAFT, "<credentials>", 201),
    # Self sign-up (accounts): the link mailed, which the policy names how long works; then the account.
    Create("/api/v1/accounts/signup/", Phase.DRAFT, "<signup>", 202, key="link_hours"),
    Create("/api/v1/accounts/signup/complete/", Phase.DRAFT, "<signup token>", 201, key="username"),
    Create("/api/v1/studies/", Phase.DRAFT, {"title": "A new study"}, 201),
    Create("/api/v1/studies/import/", Phase.DRAFT, "<bundle>", 201),
    Create("/api/v1/studies/{study_id}/copy/", Phase.CLOSED, {"title": "A copy"}, 201),
    Create("/api/v1/studies/{study_id}/members/", Phase.DRAFT, {"username": "alice"}, 201, key="username"),
    Create("/api/v1/studies/{study_id}/members/", Phase.DRAFT, {"username": "charlie"}, 202, key="<invitation>"),
    Create("/api/v1/studies/{study_id}/invitations/", Phase.DRAFT, {"username": "dave"}, 201),
    Create("/api/v1/studies/{study_id}/attributes/", Phase.DRAFT, {"name": "Robustness"}, 201),
    Create(
        "/api/v1/studies/{study_id}/metrics/",
        Phase.DRAFT,
        {"name": "Kappa", "attribute": "Accuracy", "default_range": [0.2, 0.8]},
        201,
    ),
    Create("/api/v1/studies/{study_id}/candidates/", Phase.DRAFT, {"name": "NaiveBayes"}, 201),
    Create("/api/v1/studies/{study_id}/discussion/attributes/{id}/", Phase.VOTING, {"body": "Why this?"}, 201),
    Create("/api/v1/studies/{study_id}/discussion/metrics/{id}/", Phase.VOTING, {"body": "And this?"}, 201),
    Create("/api/v1/studies/{study_id}/predictions/", Phase.DRAFT, "<upload>", 201, fmt="multipart"),
    Create("/api/v1/studies/{study_id}/rounds/", Phase.ASSESSMENT, {"message": "Check your units"}, 201, key="number"),
    Create("/api/v1/studies/{study_id}/runs/", Phase.CLOSED, None, 202),
    Create("/api/v1/runs/{run_id}/analyses/", Phase.CLOSED, {"kind": "leave_one_out"}, 202),
    # an MLflow import of more runs than MLFLOW_IMPORT_INLINE_RUNS (create_url lowers it to 1): queued
    Create(
        "/api/v1/studies/{study_id}/mlflow/imports/",
        Phase.DRAFT,
        {"experiment": "large", "mapping": [{"key": "roc_auc", "metric": "AUC"}]},
        202,
    ),
    # a webhook (its host allowed by create_url: no look-up), and its test delivery
    Create("/api/v1/studies/{study_id}/webhooks/", Phase.DRAFT, {"url": WEBHOOK_URL, "events": ["run.failed"]}, 201),
    Create("/api/v1/webhooks/{webhook_id}/test/", Phase.DRAFT, None, 202),
]


def mlflow_connect(study, folder, settings, monkeypatch):
    """Connect ``study`` to a file store under ``folder`` holding two runs of
    experiment ``large``, and import inline at most one run."""
    from mlflow.tracking import MlflowClient

    from tracking import services as tracking_services

    settings.TRACKING_FILE_ROOTS = [str(folder)]
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # logged to directly, as in tests/tracking
    uri = f"file:{folder / 'mlruns'}"
    client = MlflowClient(tracking_uri=uri)
    experiment_id = client.create_experiment("large")
    for name in ("first", "second"):
        client.log_metric(client.create_run(experiment_id, run_name=name).info.run_id, "roc_auc", 0.8)
    tracking_services.connection_set(study=study, tracking_uri=uri)
    monkeypatch.setattr(limits, "MLFLOW_IMPORT_INLINE_RUNS", 1)


def test_the_table_covers_every_create_of_the_schema(api, cast):
    schema = api(cast.alice).get("/api/schema/?format=json").json()
    creates = {
        (path, int(code))
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if method == "post"
        for code in operation["responses"]
        if code in ("201", "202")
    }
    assert creates == {(create.path, create.status) for create in CREATES}


def create_url(create, built, designer, mlflow=None):
    """The create's URL in the built study (a succeeded run of it for a run's
    creates; connected to MLflow, ``mlflow`` = (folder, settings,
    monkeypatch), for an import's)."""
    ids = {"study_id": built.study.pk}
    if "/mlflow/" in create.path:
        mlflow_connect(built.study, *mlflow)
    if "webhook" in create.path:
        mlflow[1].WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    if "{webhook_id}" in create.path:
        webhook = webhook_services.webhook_create(
            study=built.study, by=designer, url=WEBHOOK_URL, events=["run.failed"]
        )
        ids["webhook_id"] = webhook.pk
    if "discussion/attributes" in create.path:
        ids["id"] = built.attributes["Accuracy"].pk
    elif "discussion/metrics" in create.path:
        ids["id"] = built.metrics["AUC"].pk
    elif "{run_id}" in create.path:
        run = engine_services.run_launch(study=built.study, launched_by=designer)
        engine_services.run_execute(run_id=run.pk)
        ids["run_id"] = run.pk
    return create.path.format(**ids)


@pytest.mark.parametrize("create", CREATES, ids=lambda c: f"{c.path}-{c.status}")
def test_every_create_answers_with_the_location_of_what_it_made(
    create, api, cast, make_study, case_study, settings, tmp_path, monkeypatch
):
    built = make_study(create.phase)
    url = create_url(create, built, cast.alice, (tmp_path, settings, monkeypatch))
    alice = api(cast.alice)
    body = create.body
    if body == "<bundle>":
        # a draft without inputs: only staff may import other experts' inputs
        body = {**case_study, "designer": "alice", "phase": "draft"}
        for section in ("votes", "priorities", "ranges", "peer_weights"):
            del body[section]
    elif body == "<upload>":
        body = upload()
    elif body == "<credentials>":
        body = {"username": "alice", "password": PASSWORD}
    elif body in ("<signup>", "<signup token>"):
        policy = SitePolicy.current()
        policy.signup = SitePolicy.SignUp.OPEN
        policy.save()
        body = {"email": "dana@example.org"}
        if create.body == "<signup token>":
            token = signup.signup_link_make(email="dana@example.org")
            body = {"token": token, "username": "dana", "password": "a-fresh-passphrase-31"}
    anonymous = create.path.endswith(("/auth/token/", "/signup/", "/signup/complete/"))
    sender = client_with_token() if anonymous else alice
    response = sender.post(url, body, format=create.fmt)
    assert response.status_code == create.status, response.content[:300]
    location = response["Location"]
    assert location.startswith("http://testserver/api/v1/"), location

    reader = alice
    if create.path.endswith("/auth/token/"):
        reader = client_with_token(response.json()["token"])  # the new token reads itself
    elif create.path.endswith("/signup/"):
        reader = client_with_token()  # the policy, for anyone
    elif create.path.endswith("/signup/complete/"):
        reader = client_with_token(services.api_token_create(user=User.objects.get(username="dana"))[1])
    fetched = reader.get(location)
    assert fetched.status_code == 200, (location, fetched.content[:300])
    made = response.json()
    if create.key == "<invitation>":
        made = made["invitation"]
        assert location.endswith(f"/studies/{built.study.pk}/invitations/{made['id']}/")
        assert fetched.json()["username"] == "charlie" and fetched.json()["status"] == "pending"
    else:
        assert fetched.json()[create.key] == made[create.key]
    # what the GET answers is what the create answered (but a one-time key)
    shown = {k: v for k, v in made.items() if k not in ("token", "key", "invitations", "last_used_at")}
    if create.key != "<invitation>":
        got = fetched.json()
        assert {k: got[k] for k in shown if k in got} == {k: v for k, v in shown.items() if k in got}


# --- the GETs the Locations name, for the creator and for others -----------------------------


def test_a_token_is_read_by_its_owner_only(api, cast):
    token, _ = services.api_token_create(user=cast.alice, name="laptop")
    mine = api(cast.alice).get(f"{API}/auth/tokens/{token.pk}/")
    assert mine.status_code == 200
    assert (mine.json()["id"], mine.json()["name"]) == (token.pk, "laptop")
    assert "token" not in mine.json()  # the key is never shown again
    theirs = api(cast.charlie).get(f"{API}/auth/tokens/{token.pk}/")
    assert (theirs.status_code, theirs.json()) == (404, api_error("not_found", "No such token."))


def test_an_invitation_is_read_by_the_designer_only(api, cast, make_study):
    study = make_study(Phase.DRAFT).study
    invitation, _ = invitations.invitation_create(study=study, created_by=cast.alice, username="dave")
    url = f"{API}/studies/{study.pk}/invitations/{invitation.pk}/"
    read = api(cast.alice).get(url)
    assert read.status_code == 200
    assert (read.json()["id"], read.json()["username"], read.json()["status"]) == (invitation.pk, "dave", "pending")
    refused = api(cast.bob).get(url)
    assert (refused.status_code, refused.json()) == (
        403,
        api_error("permission_denied", "Only the designer of this study can see the invitations."),
    )
    assert api(cast.charlie).get(url).json() == api_error("not_found", "No such study.")
    missing = api(cast.alice).get(f"{API}/studies/{study.pk}/invitations/{invitation.pk + 100}/")
    assert (missing.status_code, missing.json()) == (404, api_error("not_found", "No such invitation."))


def test_a_post_is_read_by_members_and_a_hidden_ones_body_by_the_designer_only(api, cast, make_study):
    built = make_study(Phase.VOTING)
    post = services.post_add(
        study=built.study, author=cast.bob, body="Why accuracy?", attribute=built.attributes["Accuracy"]
    )
    url = f"{API}/studies/{built.study.pk}/discussion/posts/{post.pk}/"
    assert api(cast.carol).get(url).json()["body"] == "Why accuracy?"
    services.post_hide(post=post, by=cast.alice)
    assert api(cast.carol).get(url).json()["body"] is None
    assert api(cast.alice).get(url).json()["body"] == "Why accuracy?"
    assert api(cast.charlie).get(url).status_code == 404


def test_a_member_is_read_by_members_and_only_experts_are_found(api, cast, make_study):
    study = make_study(Phase.DRAFT).study
    assert api(cast.carol).get(f"{API}/studies/{study.pk}/members/bob/").json() == {
        "username": "bob",
        "role": "expert",
        "status": "active",
        "absence": "",
        "absence_reason": "",
        "absent_since": None,
    }
    designer = api(cast.bob).get(f"{API}/studies/{study.pk}/members/alice/")
    assert (designer.status_code, designer.json()) == (
        404,
        api_error("not_found", "No such expert in this study."),
    )
