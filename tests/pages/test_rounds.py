"""Revision rounds' pages: the designer opens and closes a round from the
study home, each expert's step pages show the group's anonymised answers
beside their own, and the study home shows who responded and the
convergence (issue 22)."""

import copy
import re

import pytest
from django.test import Client

from tests.fixtures import CAROL_JUDGMENTS
from workspace import services
from workspace.models import Phase, RevisionRound, RoundResponse
from workspace.templatetags.numbers import significant

pytestmark = pytest.mark.django_db

THREE = ("bob", "carol", "charlie")
# Weights only one expert gave: none of them may appear on another's page.
BOB = {"Accuracy": 61, "Consistency": 27, "Efficiency": 12}
CHARLIE = {"Accuracy": 13, "Consistency": 29, "Efficiency": 58}


@pytest.fixture
def panel(make_study):
    built = make_study(Phase.ASSESSMENT, experts=THREE, votes={"bob": {"attributes": ["Efficiency"], "metrics": []}})
    charlie = built.experts["charlie"]
    services.prioritisation_set(expert=built.bob, method="direct", weights=BOB)
    services.prioritisation_set(expert=built.carol, method="ahp", judgments=copy.deepcopy(CAROL_JUDGMENTS))
    services.prioritisation_set(expert=charlie, method="direct", weights=CHARLIE)
    services.ranges_set(expert=built.bob, ranges={"AUC": [0.71, 0.95]})
    services.ranges_set(expert=built.carol, ranges={"AUC": [0.75, 0.91]})
    services.ranges_set(expert=charlie, ranges={"AUC": [0.6, 0.99]})
    for expert, row in ((built.bob, (0.6, 0.2, 0.2)), (built.carol, (0.3, 0.4, 0.3)), (charlie, (0.2, 0.2, 0.6))):
        services.peer_weights_set(expert=expert, weights=dict(zip(THREE, row, strict=True)))
    return built


def client_of(user):
    client = Client()
    client.force_login(user)
    return client


def test_the_designer_opens_a_round_the_experts_see_the_group_and_the_designer_who_responded(panel, cast):
    alice, bob = client_of(cast.alice), client_of(cast.bob)
    study = panel.study.pk
    home = alice.get(f"/studies/{study}/").content.decode()
    assert "Open revision round 1" in home
    # An expert cannot open one.
    assert bob.post(f"/studies/{study}/rounds/open/", {"message": "x"}).status_code == 403
    response = alice.post(f"/studies/{study}/rounds/open/", {"message": "Check Accuracy, please"})
    assert response.status_code == 302
    assert RevisionRound.objects.get(study_id=study).message == "Check Accuracy, please"
    page = bob.get(f"/studies/{study}/my/priorities/").content.decode()
    assert "Revision round 1: how the group answered" in page
    assert "Check Accuracy, please" in page
    assert 'class="chart chart--box"' in page
    assert 'class="box__median"' not in page  # three experts: the median's band only, no stroke
    assert "61.0 %" in page  # his own Accuracy weight, marked as his
    # bob confirms his ranges with a reason
    response = bob.post(f"/studies/{study}/my/round/ranges/", {"reason": "My AUC range is the clinic's"})
    assert response.status_code == 302 and response["Location"] == f"/studies/{study}/my/ranges/"
    assert RoundResponse.objects.get(expert=panel.bob, step="ranges").action == "confirmed"
    home = alice.get(f"/studies/{study}/").content.decode()
    grid = home[home.index("Who has responded in round 1") :]
    bob_row = re.search(r"<th scope=\"row\">bob</th>(.*?)</tr>", grid, re.S).group(1)
    assert bob_row.count("not yet") == 2 and "confirmed" in bob_row
    assert "My AUC range" not in home  # the grid names who responded, not what they said


@pytest.mark.parametrize("step", ["priorities", "ranges", "peer-weights"])
def test_no_step_page_reveals_another_experts_answer(panel, cast, step):
    services.round_open(study=panel.study, by=cast.alice)
    page = client_of(cast.bob).get(f"/studies/{panel.study.pk}/my/{step}/").content.decode()
    feedback = page[page.index('id="round"') : page.index("</section>", page.index('id="round"'))]
    # charlie's own weights (13 %, 58 %) and carol's and charlie's peer rows are nowhere,
    # (the lowest or highest of a column is one expert's own: never shown)
    for secret in ("13.0 %", "58.0 %"):
        assert secret not in feedback
    # and no other expert is named, except as the one weighed on the peer weights step.
    if step != "peer-weights":
        assert "carol" not in feedback and "charlie" not in feedback
    else:
        # the coarse band of the weights each receives, never a row nor a mean: bob
        # receives 60, 30 and 20 %, so the median's band is 30 to 35 %
        text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", feedback))
        assert "bob median between 30.0 % and 35.0 %" in text
        # carol's 40 % for herself and bob's old mean 36.7 % nowhere (60 % is bob's own)
        assert not re.search(r"\b(36\.7|40\.0) %", text), text


def test_ranges_step_shows_each_bounds_median_band_never_the_list(panel, cast):
    round = services.round_open(study=panel.study, by=cast.alice)
    page = client_of(cast.carol).get(f"/studies/{panel.study.pk}/my/ranges/").content.decode()
    feedback = page[page.index('id="round"') : page.index("</section>", page.index('id="round"'))]
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", feedback))
    assert "0.6 · 0.71" not in text and "0.99" not in text  # the old sorted list, charlie's extremes
    auc = next(r for r in round.feedback["ranges"] if r["name"] == "AUC")
    for bound in ("least_acceptable", "desired"):
        low, high = auc[bound]["median_band"]
        assert f"median between {significant(low)} and {significant(high)} 3 experts: a coarse band only" in text
    assert "0.75 to 0.91" in text  # carol's own range


def test_closing_asks_first_then_keeps_the_round_and_the_home_shows_convergence(panel, cast):
    alice = client_of(cast.alice)
    study = panel.study.pk
    services.round_open(study=panel.study, by=cast.alice)
    confirm = alice.get(f"/studies/{study}/rounds/close/")
    assert confirm.status_code == 200 and "Close revision round 1?" in confirm.content.decode()
    assert RevisionRound.objects.get(study_id=study).is_open  # a GET closes nothing
    assert client_of(cast.bob).post(f"/studies/{study}/rounds/close/").status_code == 403
    assert alice.post(f"/studies/{study}/rounds/close/").status_code == 302
    services.round_open(study=panel.study, by=cast.alice)
    services.priorities_set(expert=panel.experts["charlie"], method="direct", weights=BOB)
    alice.post(f"/studies/{study}/rounds/close/")
    home = alice.get(f"/studies/{study}/").content.decode()
    assert "Convergence across rounds" in home
    assert 'id="round-convergence-title"' in home
    table = home[home.index('class="table convergence-table"') :]
    assert [int(n) for n in re.findall(r'<th scope="row">(\d+)</th>', table)[:2]] == [1, 2]
    # the second round closes again with a round-3 form
    assert "Open revision round 3" in home
    assert client_of(cast.bob).post(f"/studies/{study}/rounds/close/").status_code == 403


def test_closing_without_an_open_round_is_refused(panel, cast):
    response = client_of(cast.alice).post(f"/studies/{panel.study.pk}/rounds/close/")
    assert response.status_code == 409
    assert "No revision round is open." in response.content.decode()


# The step pages during an open round add, to their count outside one
# (tests/pages/test_expert.py, which includes looking for the open round):
# the experts' inputs read once for the group (inputs_snapshot: selected
# metrics, experts, selected attributes, attribute weights, ranges, local
# metric weights, peer weights, the consistency of the prioritisations (2),
# AHP judgments: 10), the round before and my responses (2). None of them
# grows with the experts. (The counts outside a round include the header's
# unread notifications, notifications.context_processors.)
ROUND_PAGE_QUERIES = {"priorities": 14 + 12, "ranges": 13 + 12, "peer-weights": 10 + 12}


@pytest.mark.parametrize("step", ROUND_PAGE_QUERIES)
def test_step_pages_during_a_round_have_a_fixed_number_of_queries(panel, cast, step, django_assert_num_queries):
    services.round_open(study=panel.study, by=cast.alice)
    client = client_of(cast.bob)
    with django_assert_num_queries(ROUND_PAGE_QUERIES[step]):
        assert client.get(f"/studies/{panel.study.pk}/my/{step}/").status_code == 200


def test_the_study_homes_queries_do_not_grow_with_rounds(panel, cast, django_assert_num_queries):
    client = client_of(cast.alice)
    for _ in range(3):
        services.round_open(study=panel.study, by=cast.alice)
        services.round_close(study=panel.study, by=cast.alice)
        # the home's 10, the header's unread notifications, and the closed rounds' convergence
        with django_assert_num_queries(12):
            home = client.get(f"/studies/{panel.study.pk}/").content.decode()
    assert "Convergence across rounds" in home
    services.round_open(study=panel.study, by=cast.alice)
    # with one open: + who has responded (the experts, their responses)
    with django_assert_num_queries(14):
        client.get(f"/studies/{panel.study.pk}/")


def test_the_rounds_page_lists_every_round_for_members_and_the_grid_for_the_designer(panel, make_study, cast):
    services.round_open(study=panel.study, by=cast.alice, message="First look")
    services.round_respond(expert=panel.bob, step="ranges", reason="private reason")
    services.round_close(study=panel.study, by=cast.alice)
    services.round_open(study=panel.study, by=cast.alice, message="Second look")
    path = f"/studies/{panel.study.pk}/rounds/"
    designer = client_of(cast.alice).get(path).content.decode()
    assert "First look" in designer and "Second look" in designer
    assert "Who has responded in round 2" in designer
    assert "Convergence across rounds" in designer
    assert "private reason" not in designer
    expert = client_of(cast.bob).get(path).content.decode()
    assert "First look" in expert and "Who has responded" not in expert
    # an outsider: the study does not exist for them
    other = make_study(Phase.DRAFT, experts=("carol",), title="Another")
    assert client_of(cast.bob).get(f"/studies/{other.study.pk}/rounds/").status_code == 404
    # before the assessment: nothing to show, and no query for it
    draft = client_of(cast.alice).get(f"/studies/{other.study.pk}/rounds/").content.decode()
    assert "once voting has closed" in draft
