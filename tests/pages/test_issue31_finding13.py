"""Issue 31, finding 13 (the rest): during an open revision round the steps
it reopens read "to revise" until the expert responds; the elicitation's
reference candidate is refused before any confirmation, naming the
elicited metric; the demo's experts have e-mail addresses and an expert
without one is pointed out; tables that scroll sideways say so."""

import io
import re

import pytest
from django.core.management import call_command
from django.test import Client

from tests.evaluation.elicited_fixtures import add_elicited_metric
from workspace import services
from workspace.models import Candidate, Membership, Phase, Study

pytestmark = pytest.mark.django_db


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _tiles(page: str) -> dict[str, str]:
    """The expert's step tiles on the study home: label -> state shown."""
    steps = page[page.index('id="my-steps-title"') : page.index("</ol>", page.index('id="my-steps-title"'))]
    return {
        label: state
        for state, label in re.findall(
            r'<span class="step__state[^"]*">([^<]+)</span>\s*<span class="step__body">\s*'
            r'<a class="step__label"[^>]*>([^<]+)</a>',
            steps,
        )
    }


def _grid_row(page: str, username: str) -> list[str]:
    grid = page[page.index('id="progress-title"') :]
    row = re.search(rf'<span class="table__title">{username}</span>.*?</tr>', grid, re.S).group(0)
    return re.findall(r'<span class="badge badge--step-[a-z]+">([^<]+)</span>', row)


# --- an open round's steps read "to revise" until the expert responds -----------------


def test_an_open_rounds_steps_read_to_revise_until_the_expert_responds(make_study, cast):
    built = make_study(Phase.ASSESSMENT, inputs=True)
    bob = client_of(cast.bob)
    home = f"/studies/{built.study.pk}/"
    before = _tiles(bob.get(home).content.decode())
    assert [before[s] for s in ("Priorities", "Acceptable ranges", "Peer weights")] == ["Done"] * 3
    services.round_open(study=built.study, by=cast.alice)
    during = bob.get(home).content.decode()
    tiles = _tiles(during)
    assert [tiles[s] for s in ("Votes", "Priorities", "Acceptable ranges", "Peer weights")] == [
        "Done",  # not reopened by the round
        "To revise",
        "To revise",
        "To revise",
    ]
    assert "Revision round 1 is open: revise your priorities or confirm them unchanged." in during
    # The next step is the first to revise; My steps opens it.
    assert f'href="/studies/{built.study.pk}/my/priorities/">Priorities</a></p>' in during
    assert bob.get(f"/studies/{built.study.pk}/my/")["Location"] == f"/studies/{built.study.pk}/my/priorities/"
    # Confirmed unchanged (ranges) or saved (peer weights): done again.
    services.round_respond(expert=built.bob, step="ranges")
    services.peer_weights_set(expert=built.bob, weights={"bob": 0.7, "carol": 0.3})
    tiles = _tiles(bob.get(home).content.decode())
    assert [tiles[s] for s in ("Priorities", "Acceptable ranges", "Peer weights")] == ["To revise", "Done", "Done"]
    # The designer's grid says the same of each expert.
    grid = client_of(cast.alice).get(home).content.decode()
    assert _grid_row(grid, "bob") == ["Done", "To revise", "Done", "Done"]
    assert _grid_row(grid, "carol") == ["None", "To revise", "To revise", "To revise"]  # she cast no vote
    # The step pages' indicator too, and the round's status in the API for the expert.
    page = bob.get(f"/studies/{built.study.pk}/my/ranges/").content.decode()
    states = re.findall(r'<span class="steps__state">([^<]+)</span>', page)
    assert states == ["done", "to revise", "done", "done"]
    services.round_close(study=built.study, by=cast.alice)
    tiles = _tiles(bob.get(home).content.decode())
    assert [tiles[s] for s in ("Priorities", "Acceptable ranges", "Peer weights")] == ["Done"] * 3


def test_the_api_says_which_steps_the_expert_has_still_to_revise(make_study, cast, api):
    built = make_study(Phase.ASSESSMENT, inputs=True)
    services.round_open(study=built.study, by=cast.alice)
    services.round_respond(expert=built.bob, step="ranges")
    path = f"/api/v1/studies/{built.study.pk}/rounds/1/"
    assert api(cast.bob).get(path).json()["to_revise"] == ["priorities", "peer_weights"]
    assert api(cast.alice).get(path).json()["to_revise"] is None  # not an expert: see responses
    services.round_close(study=built.study, by=cast.alice)
    assert api(cast.bob).get(path).json()["to_revise"] == []  # closed: nothing left to revise


# --- the elicitation's reference candidate: refused before any confirmation -------------

KEPT = (
    "J48 can't be removed: the elicited metric Cost-weighted accuracy asks its questions from J48's "
    "predictions: choose another reference candidate for it first."
)


def test_the_reference_candidate_is_refused_before_confirming_naming_the_elicited_metric(make_study, cast, api):
    built = make_study()
    add_elicited_metric(built)
    j48, jrip = built.candidates["J48"], built.candidates["JRip"]
    alice = client_of(cast.alice)
    setup = alice.get(f"/studies/{built.study.pk}/setup/").content.decode()
    # The candidates table: no Remove for J48, and why; JRip keeps its Remove.
    assert f"/setup/candidates/{j48.pk}/remove/" not in setup
    assert f"/setup/candidates/{jrip.pk}/remove/" in setup
    assert "Can't be removed: the elicited metric Cost-weighted accuracy asks its questions" in setup
    path = f"/studies/{built.study.pk}/setup/candidates/{j48.pk}/remove/"
    page = alice.get(path)
    text = page.content.decode()
    assert page.status_code == 200 and KEPT.replace("'", "&#x27;") in text
    assert "The candidate “J48” can&#x27;t be removed" in text
    assert "<form" not in text[text.index('id="confirm-title"') :].split("</section>")[0]  # no removal form
    refused = alice.post(path)
    assert refused.status_code == 409 and Candidate.objects.filter(pk=j48.pk).exists()
    # The API refuses it too, with the same reason (services.candidate_remove's own rule).
    response = api(cast.alice).delete(f"/api/v1/studies/{built.study.pk}/candidates/{j48.pk}/")
    assert response.json()["fields"] == {"candidate": [KEPT.removeprefix("J48 can't be removed: ").rstrip(".")]}
    assert Candidate.objects.filter(pk=j48.pk).exists()
    # Another candidate still asks to confirm, then goes.
    assert (
        "Remove candidate</button>"
        in alice.get(f"/studies/{built.study.pk}/setup/candidates/{jrip.pk}/remove/").content.decode()
    )


# --- e-mail addresses: the demo's experts have one; an expert without one is pointed out -----


def test_the_demos_accounts_get_example_org_addresses(settings):
    settings.DEBUG = True
    out = io.StringIO()
    call_command("load_demo", stdout=out)
    study = Study.objects.get()
    experts = Membership.objects.filter(study=study, role="expert").select_related("user")
    assert experts.count() == 4
    assert {m.user.email for m in experts} == {f"{m.user.username}@example.org" for m in experts}
    assert study.designer.email == "designer@example.org"
    assert "statistician@example.org" in out.getvalue()


def test_an_expert_without_an_address_is_pointed_out_to_the_designer(make_study, cast):
    built = make_study(Phase.DRAFT)
    type(cast.bob).objects.filter(pk=cast.bob.pk).update(email="bob@example.org")
    alice = client_of(cast.alice)
    page = alice.get(f"/studies/{built.study.pk}/experts/").content.decode()
    assert '<span class="table__sub">bob@example.org</span>' in page
    carol = re.search(r'<span class="table__title">carol</span>.*?</td>', page, re.S).group(0)
    assert "<strong>no e-mail address</strong>: reminders can't reach them" in carol.replace("&#x27;", "'")
    # The designer adding themselves without an address is told at once.
    response = alice.post(f"/studies/{built.study.pk}/experts/invite/", {"username": "alice"}, follow=True)
    said = [str(m) for m in response.context["messages"]]
    assert said == ["You are now an expert of this study too. You have no e-mail address: reminders can't reach you."]
