"""The study bundle in the pages (issue 16, finding 11): the designer
downloads the ``approve-study/1`` file from the study home (the bytes the
API's export gives), the import page reads it back into the same study;
experts get 403, outsiders 404, anonymous visitors the log-in page."""

import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.pages.test_designer import body, client_for, grow, upload
from tests.two_factor import verified_client
from workspace import invitations
from workspace.models import Invitation, Phase, Study

User = get_user_model()


def download_path(study: Study) -> str:
    return f"/studies/{study.pk}/bundle.json"


def test_the_study_home_links_the_designer_to_the_bundle(make_study, cast) -> None:
    built = make_study(Phase.DRAFT)
    page = body(client_for(cast.alice).get(f"/studies/{built.study.pk}/"))
    assert f'href="{download_path(built.study)}" download>Download bundle</a>' in page
    expert_page = body(client_for(cast.bob).get(f"/studies/{built.study.pk}/"))
    assert download_path(built.study) not in expert_page and "Download bundle" not in expert_page


@pytest.mark.parametrize("phase", [Phase.DRAFT, Phase.CLOSED])
def test_the_download_is_the_apis_export_byte_for_byte(make_study, cast, phase) -> None:
    built = make_study(phase)
    client = client_for(cast.alice)
    response = client.get(download_path(built.study))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == f'attachment; filename="approve-study-{built.study.pk}.json"'
    api = client.get(f"/api/v1/studies/{built.study.pk}/export/", HTTP_ACCEPT="application/json")
    assert api.status_code == 200 and response.content == api.content
    bundle = json.loads(response.content)
    assert bundle["format"] == "approve-study/1" and bundle["title"] == "Choosing a classifier"
    assert bundle["phase"] == phase and bundle["experts"] == ["bob", "carol"]
    if phase == Phase.CLOSED:
        assert set(bundle["priorities"]) == {"bob", "carol"}


def test_experts_get_403_outsiders_404_anonymous_the_log_in(make_study, cast) -> None:
    built = make_study(Phase.CLOSED)
    path = download_path(built.study)
    expert = client_for(cast.bob).get(path)
    assert expert.status_code == 403 and "Only the designer of this study can download" in body(expert)
    assert client_for(cast.charlie).get(path).status_code == 404
    assert client_for(cast.alice).get("/studies/999999/bundle.json").status_code == 404
    anonymous = Client().get(path)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/?next=")
    assert client_for(cast.alice).post(path).status_code == 405


def test_export_through_the_page_import_through_the_page_same_study(make_study, cast) -> None:
    built = make_study(Phase.DRAFT)
    client = client_for(cast.alice)
    exported = client.get(download_path(built.study)).content
    response = client.post("/studies/new/", {"form": "import", "bundle": upload(exported, "approve-study.json")})
    copy = Study.objects.exclude(pk=built.study.pk).get()
    assert response.status_code == 302 and response["Location"] == f"/studies/{copy.pk}/"
    # The other experts are invited (consent); once they accept, the copy is the study.
    for invitation in Invitation.objects.filter(study=copy).order_by("username"):
        invitations.invitation_accept(invitation=invitation, user=User.objects.get(username=invitation.username))
    again = json.loads(client.get(download_path(copy)).content)
    original = json.loads(exported)
    assert again == original
    assert [c["name"] for c in again["candidates"]] == [c["name"] for c in original["candidates"]]
    assert again["candidates"][0]["measurements"] and again["metrics"][0]["default_range"]


def test_the_download_makes_a_fixed_number_of_queries(make_study, cast, django_assert_num_queries) -> None:
    built = make_study(Phase.DRAFT)
    client = client_for(cast.alice)
    # the session, the user, the study, my roles (4); the export: the designer,
    # the experts, attributes, metrics, candidates, measured values and the
    # experts' inputs (votes, priorities, ranges, peer weights) in a fixed number
    with django_assert_num_queries(QUERIES):
        assert client.get(download_path(built.study)).status_code == 200
    grow(built, cast, 3)
    with django_assert_num_queries(QUERIES):
        assert client.get(download_path(built.study)).status_code == 200


QUERIES = 16  # the ranges to confirm: one query, written only when some are


def test_the_designer_imports_her_own_download_back_as_a_copy(make_study, cast) -> None:
    """Issue 31, item 3: a closed study's bundle holds bob's and carol's
    inputs; her import leaves them out, says so, and makes a draft."""
    built = make_study(Phase.CLOSED)
    client = client_for(cast.alice)
    exported = client.get(download_path(built.study)).content
    response = client.post("/studies/new/", {"form": "import", "bundle": upload(exported, "approve-study.json")})
    copy = Study.objects.exclude(pk=built.study.pk).get()
    assert response.status_code == 302 and response["Location"] == f"/studies/{copy.pk}/"
    assert (copy.phase, copy.designer) == (Phase.DRAFT, cast.alice)
    home = body(client.get(response["Location"]))
    assert (
        "The study “Choosing a classifier” was imported. The inputs of 2 experts (bob, carol) were left out: only "
        "staff can import inputs entered by someone else. The study was imported as a draft, without anyone&#x27;s "
        "inputs; the experts are invited and give their own. Invited as experts (they join by accepting): bob, carol."
    ) in home
    assert not copy.memberships.filter(role="expert").exists()
    again, original = json.loads(client.get(download_path(copy)).content), json.loads(exported)
    for key in ("attributes", "metrics", "candidates", "attribute_threshold", "metric_threshold"):
        assert again[key] == original[key], key
    assert (again["priorities"], again["peer_weights"]) == ({}, {}) and original["priorities"]


def test_a_staff_import_of_the_download_is_the_full_import_as_before(make_study, cast) -> None:
    # In voting: the experts' imported votes hold the vote open until they confirm them (formats.md).
    built = make_study(Phase.VOTING)
    cast.alice.is_staff = True
    cast.alice.save(update_fields=["is_staff"])
    client = verified_client(cast.alice)  # staff sign in with a second factor (tests/two_factor.py)
    exported = client.get(download_path(built.study)).content
    response = client.post("/studies/new/", {"form": "import", "bundle": upload(exported, "approve-study.json")})
    copy = Study.objects.exclude(pk=built.study.pk).get()
    assert response.status_code == 302 and copy.phase == Phase.VOTING
    experts = copy.memberships.filter(role="expert").order_by("user__username")
    assert [(m.user.username, m.status, m.inputs_imported_by) for m in experts] == [
        ("bob", "pending", cast.alice),
        ("carol", "pending", cast.alice),
    ]
    assert "were left out" not in body(client.get(response["Location"]))
    again = json.loads(client.get(download_path(copy)).content)
    assert again["votes"] == json.loads(exported)["votes"] and again["votes"]["attributes"]["bob"]
