"""Live progress (issue 32, item 6): the study home polls with the version
it shows; the server answers 204 in two queries while nothing changed, and
the home's live part (the designer's progress grid, the expert's steps, the
timeline) with the phase badge once an expert saved or the study moved."""

import re

import pytest

from workspace import services
from workspace.models import Phase

from .test_studyhome import as_user, text_of

pytestmark = pytest.mark.django_db


def _live_url(page: str) -> str:
    found = re.search(r'id="home-live"[^>]*hx-get="([^"]+)"[^>]*hx-trigger="every (\d+)s"', page)
    assert found, page[:3000]
    return found.group(1).replace("&amp;", "&")


def _version(url: str) -> int:
    return int(url.rsplit("version=", 1)[1])


def test_the_home_polls_with_its_version(client, cast, make_study, settings):
    settings.LIVE_POLL_SECONDS = 7
    built = make_study(Phase.VOTING)
    page = as_user(client, cast.alice).get(f"/studies/{built.study.pk}/").content.decode()
    url = _live_url(page)
    built.study.refresh_from_db()
    assert url == f"/studies/{built.study.pk}/live/?version={built.study.input_version}"
    assert 'hx-trigger="every 7s"' in page
    assert "This page updates by itself when an expert saves" in text_of(client.get(f"/studies/{built.study.pk}/"))


def test_unchanged_is_a_204_in_two_queries_and_a_save_sends_the_new_grid(
    client, cast, make_study, django_assert_num_queries
):
    built = make_study(Phase.VOTING, votes={})
    designer = as_user(client, cast.alice)
    url = _live_url(designer.get(f"/studies/{built.study.pk}/").content.decode())
    # The session, the user; the study with my memberships: nothing else.
    with django_assert_num_queries(4):
        unchanged = designer.get(url)
    assert (unchanged.status_code, unchanged.content, unchanged["Cache-Control"]) == (204, b"", "no-store")

    services.votes_set(expert=built.experts["bob"], attributes=["Efficiency"], metrics=[])
    changed = designer.get(url)
    assert changed.status_code == 200 and changed["Cache-Control"] == "no-store"
    fragment = changed.content.decode()
    assert fragment.lstrip().startswith('<div id="home-live"')
    assert "<html" not in fragment  # the part, not the page
    assert _version(_live_url(fragment)) == _version(url) + 1
    grid = text_of(changed)
    assert "bob Done 1 vote cast; the expert can change them until voting closes." in grid
    assert "carol Not yet No vote cast yet" in grid
    # The header's phase badge, out of band.
    assert re.search(
        r'<span id="study-phase" class="badge badge--voting" hx-swap-oob="true">Phase: Voting</span>', fragment
    )
    assert designer.get(_live_url(fragment)).status_code == 204


def test_the_experts_steps_and_the_phase_follow_too(client, cast, make_study):
    built = make_study(Phase.DRAFT)
    expert = as_user(client, cast.bob)
    url = _live_url(expert.get(f"/studies/{built.study.pk}/").content.decode())
    assert "Nothing to do yet" in text_of(expert.get(f"/studies/{built.study.pk}/"))
    services.study_transition(study=built.study, to=Phase.VOTING)
    changed = expert.get(url)
    assert changed.status_code == 200
    assert "Your next step: Vote" in text_of(changed)
    assert 'class="badge badge--voting" hx-swap-oob="true"' in changed.content.decode()


def test_outsiders_get_404_and_the_signed_out_the_sign_in_page(client, cast, make_study):
    built = make_study(Phase.VOTING)
    url = f"/studies/{built.study.pk}/live/?version=0"
    assert as_user(client, cast.charlie).get(url).status_code == 404
    assert client.get(f"/studies/{built.study.pk + 999}/live/?version=0").status_code == 404
    client.logout()
    signed_out = client.get(url)
    assert signed_out.status_code == 302 and signed_out["Location"].startswith("/accounts/login/")
    # Any version but the current one, or none, is a change: the part is sent.
    assert as_user(client, cast.bob).get(f"/studies/{built.study.pk}/live/?version=x").status_code == 200
    assert client.get(f"/studies/{built.study.pk}/live/").status_code == 200
    assert client.post(url).status_code == 405


def test_the_api_version_answers_304_until_the_study_changes(cast, make_study, django_assert_max_num_queries):
    from rest_framework.test import APIClient

    built = make_study(Phase.VOTING, votes={})
    client = APIClient()
    client.force_authenticate(cast.bob)
    url = f"/api/v1/studies/{built.study.pk}/version/"
    first = client.get(url)
    built.study.refresh_from_db()
    assert first.status_code == 200
    assert first.json() == {"study": built.study.pk, "version": built.study.input_version, "phase": "voting"}
    tag = first["ETag"]
    assert tag == f'"study-{built.study.pk}-v{built.study.input_version}"'
    with django_assert_max_num_queries(3):
        same = client.get(url, HTTP_IF_NONE_MATCH=f'"other", {tag}')
    assert (same.status_code, same.content, same["ETag"]) == (304, b"", tag)
    services.votes_set(expert=built.experts["carol"], attributes=["Efficiency"], metrics=[])
    changed = client.get(url, HTTP_IF_NONE_MATCH=tag)
    assert changed.status_code == 200 and changed.json()["version"] == built.study.input_version + 1
    assert changed["ETag"] != tag
    outsider = APIClient()
    outsider.force_authenticate(cast.charlie)
    assert outsider.get(url).status_code == 404
    assert outsider.get(url, HTTP_IF_NONE_MATCH=tag).status_code == 404  # no 304 leaks that it exists
