"""The dashboard, a study's home with its phase actions and deletion, the
invitations answered from the dashboard, the runs list and a run's page
(issue 8, items 1, 5 and 6), through Django's test client with the fixed
cast: designer alice, experts bob and carol, outsider charlie."""

import html
import re
from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user_model

from engine import selectors as engine_selectors
from engine import services as engine_services
from engine.models import Run
from tests.fixtures import complete_assessment
from tests.two_factor import verified_client
from workspace import invitations, services
from workspace.bundles import study_import_bundle
from workspace.models import AttributePrioritisation, Invitation, Membership, PeerWeight, Phase, Study
from workspace.templatetags.numbers import significant

pytestmark = pytest.mark.django_db


def text_of(response) -> str:
    """The page's text with tags removed and spaces collapsed, to check
    sentences as a reader sees them."""
    body = response.content.decode()
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", body, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body))).strip()


def as_user(client, user):
    client.force_login(user)
    return client


def launch(built, user):
    """A launched run, not yet executed (a test's transaction never commits,
    so its task is never sent)."""
    return engine_services.run_launch(study=built.study, launched_by=user)


# --- the dashboard ---------------------------------------------------------------------


def test_dashboard_says_per_role_what_is_left_in_voting(client, cast, make_study):
    built = make_study(Phase.VOTING)  # bob voted for Efficiency, carol cast nothing
    alice = text_of(as_user(client, cast.alice).get("/"))
    assert "As designer: Voting: open. 1 of 2 experts have voted." in alice
    bob = text_of(as_user(client, cast.bob).get("/"))
    assert "As expert: Voting: open. Your votes are cast." in bob
    carol = as_user(client, cast.carol).get("/")
    assert "As expert: Voting: open. You have not voted yet." in text_of(carol)
    assert f'href="/studies/{built.study.pk}/"' in carol.content.decode()


def test_dashboard_counts_missing_assessment_inputs_then_says_ready(client, cast, make_study):
    built = make_study(Phase.ASSESSMENT)
    page = text_of(as_user(client, cast.alice).get("/"))
    assert "2 experts still missing priorities." in page
    assert "2 experts still missing ranges." in page  # AUC has no default range
    assert "2 experts still missing peer weights." in page
    assert "Ready to close" not in page
    bob = text_of(as_user(client, cast.bob).get("/"))
    assert "0 of 3 assessment steps done. Still to give: priorities, acceptable ranges, peer weights." in bob

    weights = {"Accuracy": 5, "Consistency": 3, "Efficiency": 2}
    services.prioritisation_set(expert=built.bob, method="direct", weights=weights)
    bob = text_of(client.get("/"))
    assert "1 of 3 assessment steps done. Still to give: acceptable ranges, peer weights." in bob
    complete_assessment(built)
    assert "2 of 3" not in text_of(client.get("/"))
    assert "3 of 3 assessment steps done. Nothing left to do." in text_of(client.get("/"))
    alice = text_of(as_user(client, cast.alice).get("/"))
    assert "As designer: Ready to close: every expert has given every input." in alice
    assert "still missing" not in alice


def test_dashboard_in_draft_and_closed(client, cast, make_study):
    make_study(Phase.DRAFT, title="Drafted")
    closed = make_study(Phase.CLOSED, title="Finished")
    launch(closed, cast.alice)
    page = text_of(as_user(client, cast.alice).get("/"))
    assert (
        "Setting up: 4 attributes, 5 metrics, 2 candidates, 2 experts. Open voting once the setup is complete."
    ) in page
    assert "Closed: inputs are frozen. 1 validation run so far." in page
    bob = text_of(as_user(client, cast.bob).get("/"))
    assert "As expert: Waiting for the designer to open voting." in bob
    assert "As expert: Closed: your inputs are frozen (3 of 3 assessment steps were done)." in bob


def test_dashboard_designer_who_is_also_an_expert_sees_both_roles(client, cast):
    study = services.study_create(designer=cast.alice, title="Both hats")
    services.expert_add(study=study, user=cast.alice)
    page = text_of(as_user(client, cast.alice).get("/"))
    assert "As designer: Setting up: 0 attributes, 0 metrics, 0 candidates, 1 expert." in page
    assert "As expert: Waiting for the designer to open voting." in page


def test_dashboard_links_to_a_new_study(client, cast, make_study):
    """A user starts a study from the dashboard (the journey found no way
    there but typing /studies/new/), whether or not they have studies."""
    empty = as_user(client, cast.charlie).get("/").content.decode()
    assert '<a class="button button--primary" href="/studies/new/">New study</a>' in empty
    assert '<a href="/studies/new/">start a study</a>' in empty
    make_study(Phase.DRAFT)
    page = as_user(client, cast.alice).get("/").content.decode()
    assert '<a class="button button--primary" href="/studies/new/">New study</a>' in page
    assert client.get("/studies/new/").status_code == 200


def test_dashboard_query_count_is_fixed(client, cast, make_study, django_assert_num_queries):
    make_study(Phase.ASSESSMENT)
    as_user(client, cast.bob)

    def count_queries():
        # session, user, the header's unread notifications, the studies (designer and setup counts as
        # subqueries), my memberships with my progress, the experts of the
        # studies I design with theirs, the invitations addressed to me, the
        # selected elicited metrics of the studies in the assessment
        with django_assert_num_queries(8):
            return client.get("/")

    first = count_queries()
    assert len(first.context["studies"]) == 1
    # More studies of both roles, more experts, more invitations: same count.
    other = services.study_create(designer=cast.bob, title="Bob's own")
    services.expert_add(study=other, user=cast.bob)
    services.expert_add(study=other, user=cast.carol)
    make_study(Phase.VOTING, title="Second")
    invitations.invitation_create(
        study=services.study_create(designer=cast.carol, title="C"), created_by=cast.carol, username="bob"
    )
    again = count_queries()
    assert len(again.context["studies"]) == 3
    assert len(again.context["invitations"]) == 1


def test_anonymous_is_sent_to_log_in(client, make_study):
    built = make_study()
    for path in ("/", f"/studies/{built.study.pk}/", f"/studies/{built.study.pk}/runs/"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


# --- invitations on the dashboard ----------------------------------------------------------


def test_accept_an_invitation_from_the_dashboard(client, cast, make_study):
    built = make_study(Phase.DRAFT, experts=("carol",))
    invitation, _ = invitations.invitation_create(study=built.study, created_by=cast.alice, username="bob")
    as_user(client, cast.bob)
    page = text_of(client.get("/"))
    assert "Invitations for you (1)" in page
    assert "Choosing a classifier alice invites you to take part as an expert." in page
    response = client.post(f"/invitations/{invitation.pk}/accept/")
    assert response.status_code == 302 and response["Location"] == f"/studies/{built.study.pk}/"
    assert Membership.objects.get(study=built.study, user=cast.bob, role="expert").status == "active"
    assert "You joined “Choosing a classifier” as an expert." in text_of(client.get(response["Location"]))
    assert "Invitations for you" not in text_of(client.get("/"))


def test_decline_an_invitation_and_others_cannot_answer_it(client, cast, make_study):
    built = make_study(Phase.DRAFT, experts=("carol",))
    invitation, _ = invitations.invitation_create(study=built.study, created_by=cast.alice, username="bob")
    # Not addressed to charlie: not found, and nothing changes.
    assert as_user(client, cast.charlie).post(f"/invitations/{invitation.pk}/accept/").status_code == 404
    assert client.post(f"/invitations/{invitation.pk}/decline/").status_code == 404
    invitation.refresh_from_db()
    assert invitation.status == "pending"
    as_user(client, cast.bob)
    assert client.get(f"/invitations/{invitation.pk}/decline/").status_code == 405
    response = client.post(f"/invitations/{invitation.pk}/decline/", follow=True)
    assert "You declined the invitation to “Choosing a classifier”." in text_of(response)
    invitation.refresh_from_db()
    assert invitation.status == "declined"
    assert not Membership.objects.filter(study=built.study, user=cast.bob).exists()


def test_accepting_after_draft_is_refused_in_words(client, cast, make_study):
    built = make_study(Phase.DRAFT, experts=("carol",))
    invitation, _ = invitations.invitation_create(study=built.study, created_by=cast.alice, username="bob")
    services.study_open_voting(study=built.study)
    response = as_user(client, cast.bob).post(f"/invitations/{invitation.pk}/accept/")
    assert response.status_code == 409
    assert "Joining a study as an expert is only possible in the draft phase" in text_of(response)
    assert not Membership.objects.filter(study=built.study, user=cast.bob).exists()


@pytest.fixture
def imported(cast, case_study):
    """The case study imported in assessment by alice, staff: its four
    experts hold pending memberships with inputs in their names."""
    cast.alice.is_staff = True
    cast.alice.save(update_fields=["is_staff"])
    bundle = case_study
    bundle["designer"], bundle["phase"] = "alice", "assessment"
    study = study_import_bundle(bundle=bundle, importer=cast.alice)
    clinician = get_user_model().objects.get(username="clinician")
    return study, clinician, Invitation.objects.get(study=study, username="clinician")


def test_imported_inputs_are_shown_and_must_be_confirmed(client, imported, unchanged):
    study, clinician, invitation = imported
    as_user(client, clinician)
    dashboard = text_of(client.get("/"))
    assert "alice imported inputs in your name. Look them over before accepting; declining deletes them." in dashboard
    page = client.get(f"/invitations/{invitation.pk}/accept/")
    assert page.status_code == 200
    body = text_of(page)
    assert "Inputs imported in your name by alice" in body
    assert "Peer weights statistician 0.2" in body or "statistician 0." in body
    assert 'type="checkbox" name="confirm_inputs"' in page.content.decode()
    # Without the box ticked: refused under the box, nothing written.
    with unchanged():
        refused = client.post(f"/invitations/{invitation.pk}/accept/", {})
    assert refused.status_code == 400
    assert "must be true: alice imported inputs in your name" in text_of(refused)
    assert 'id="id_confirm_inputs_error"' in refused.content.decode()
    accepted = client.post(f"/invitations/{invitation.pk}/accept/", {"confirm_inputs": "on"})
    assert accepted.status_code == 302
    membership = Membership.objects.get(study=study, user=clinician, role="expert")
    assert membership.status == "active" and membership.inputs_confirmed_at is not None


def test_a_refused_close_names_who_is_missing_what(client, cast, imported, unchanged):
    study, _, _ = imported
    verified_client(cast.alice, client)  # alice is staff: signed in with a second factor (tests/two_factor.py)
    confirm = text_of(client.get(f"/studies/{study.pk}/phase/closed/"))
    assert "clinician: clinician has not yet confirmed the inputs imported by alice" in confirm
    with unchanged():
        refused = client.post(f"/studies/{study.pk}/phase/closed/")
    assert refused.status_code == 409
    body = text_of(refused)
    assert "Refused: Assessment cannot close, inputs are missing:" in body
    for name in ("statistician", "informatician", "researcher", "clinician"):
        assert f"{name}: {name} has not yet confirmed the inputs imported by alice" in body
    # The designer's grid says it too.
    home = text_of(client.get(f"/studies/{study.pk}/"))
    assert "clinician pending clinician has not yet confirmed the inputs imported by alice" in home


# --- the study home ---------------------------------------------------------------------------


def test_study_home_statuses_per_role(client, cast, make_study):
    built = make_study(Phase.VOTING)
    path = f"/studies/{built.study.pk}/"
    assert as_user(client, cast.charlie).get(path).status_code == 404
    assert as_user(client, cast.charlie).get("/studies/999999/").status_code == 404
    bob = as_user(client, cast.bob).get(path)
    assert bob.status_code == 200
    assert "Progress of the experts" not in text_of(bob)
    assert "Delete study" not in text_of(bob)
    alice = as_user(client, cast.alice).get(path)
    assert alice.status_code == 200
    assert "Progress of the experts" in text_of(alice)
    assert "Your steps as an expert" not in text_of(alice)


def test_study_home_timeline_and_setup_summary(client, cast, make_study):
    built = make_study(Phase.ASSESSMENT)
    page = text_of(as_user(client, cast.bob).get(f"/studies/{built.study.pk}/"))
    assert (
        "1 Draft done The designer sets up attributes, metrics, candidates, experts, default ranges and thresholds. "
        "Freezes: Opening the vote fixes the attributes, the metrics and the experts."
    ) in page
    assert "2 Voting done" in page
    assert "3 Assessment current phase Experts prioritise the selected attributes" in page
    assert "Freezes: Closing the assessment freezes every expert's inputs." in page
    assert "4 Closed to come" in page
    assert 'aria-current="step"' in client.get(f"/studies/{built.study.pk}/").content.decode()
    assert "Setup: 4 attributes, 5 metrics, 2 candidates" in page
    assert "Efficiency efficiency matters".lower() in page.lower()
    assert "Complementary Selected" in page  # Efficiency got bob's vote
    assert "Flexibility Flexibility matters Complementary Not selected" in page
    assert "Fold stdev: lower is better; default range from 0.15 (least acceptable) to 0.05 (desired)" in page
    assert "AUC: higher is better; no default range" in page
    assert "Attribute threshold at least 1 vote" in page
    assert "Experts (2) bob (you) carol" in page


def test_study_home_next_step_for_an_expert(client, cast, make_study):
    built = make_study(Phase.ASSESSMENT)
    as_user(client, cast.bob)
    page = text_of(client.get(f"/studies/{built.study.pk}/"))
    assert "Your next step: Priorities" in page
    assert "Done Votes 1 vote cast; voting is closed." in page
    assert "Missing Priorities The selected attributes are not prioritised yet." in page
    assert "Missing Acceptable ranges No range yet for 1 metric without a default range." in page
    assert "Missing Peer weights 0 of 2 experts weighted." in page
    raw = client.get(f"/studies/{built.study.pk}/").content.decode()
    for step in ("votes", "priorities", "ranges", "peer-weights"):
        assert f'href="/studies/{built.study.pk}/my/{step}/"' in raw

    services.prioritisation_set(
        expert=built.bob,
        method="ahp",
        judgments=[
            ["Accuracy", "Consistency", 3],
            ["Accuracy", "Efficiency", 5],
            ["Consistency", "Efficiency", 2],
        ],
    )
    changed = AttributePrioritisation.objects.get(expert=built.bob).updated_at
    page = text_of(client.get(f"/studies/{built.study.pk}/"))
    assert "Your next step: Acceptable ranges" in page
    assert f"Done Priorities Given (AHP). Last changed {changed:%-d %b %Y, %H:%M} UTC." in page


def test_study_home_designer_grid_with_times(client, cast, make_study):
    built = make_study(Phase.ASSESSMENT)
    services.prioritisation_set(
        expert=built.carol, method="direct", weights={"Accuracy": 6, "Consistency": 3, "Efficiency": 1}
    )
    services.peer_weights_set(expert=built.carol, weights={"bob": 0.5, "carol": 0.5})
    changed = AttributePrioritisation.objects.get(expert=built.carol).updated_at
    page = text_of(as_user(client, cast.alice).get(f"/studies/{built.study.pk}/"))
    grid = page[page.index("Progress of the experts") : page.index("Setup:")]
    assert grid.startswith("Progress of the experts Expert Votes Priorities Acceptable ranges Peer weights")
    assert "bob Done 1 vote cast; voting is closed. Missing The selected attributes are not prioritised yet." in grid
    assert (
        f"carol None No vote cast; voting is closed. Done {changed:%-d %b %Y, %H:%M} UTC Given (direct weights). "
        "Missing No range yet for 1 metric without a default range. Done Every expert weighted (2)."
    ) in grid
    assert "2 experts still missing ranges." in page and "1 expert still missing priorities." in page
    assert "Close assessment…" in page


def test_study_home_query_count_is_fixed(client, cast, make_study, django_assert_num_queries):
    built = make_study(Phase.ASSESSMENT, inputs=True)
    path = f"/studies/{built.study.pk}/"

    def count_queries(user, rounds=1):
        as_user(client, user)
        # session, user, the header's unread notifications, the study with its designer, my memberships, the
        # attributes, the metrics, the candidate count, the experts with
        # their progress, the elicited metrics (their answers only when the
        # study has some); from the assessment on, the revision rounds
        with django_assert_num_queries(10 + rounds):
            return client.get(path)

    assert count_queries(cast.alice).status_code == 200
    assert count_queries(cast.bob).status_code == 200
    # More candidates; more experts cannot join after draft, so a study
    # built with more of them from the start.
    for number in range(5):
        services.candidate_add(study=built.study, name=f"Extra {number}")
    assert count_queries(cast.alice).context["setup"]["candidate_count"] == 7
    User = get_user_model()
    for name in ("dave", "erin", "frank"):
        User.objects.create_user(username=name, password="x-password-long-enough")
    study = services.study_create(designer=cast.alice, title="Bigger")
    for name in ("bob", "carol", "dave", "erin", "frank"):
        services.expert_add(study=study, user=User.objects.get(username=name))
    path = f"/studies/{study.pk}/"
    assert len(count_queries(cast.alice, rounds=0).context["experts"]) == 5


# --- phase actions ------------------------------------------------------------------------------


def test_phase_actions_are_the_designers(client, cast, make_study, unchanged):
    built = make_study(Phase.VOTING)
    path = f"/studies/{built.study.pk}/phase/assessment/"
    with unchanged():
        assert as_user(client, cast.charlie).get(path).status_code == 404
        assert client.post(path).status_code == 404
        forbidden = as_user(client, cast.bob).get(path)
        assert forbidden.status_code == 403
        assert "Only the designer of this study can move the study from one phase to the next." in text_of(forbidden)
        assert client.post(path).status_code == 403
        assert client.post(f"/studies/{built.study.pk}/delete/").status_code == 403
        assert as_user(client, cast.alice).get(f"/studies/{built.study.pk}/phase/nowhere/").status_code == 404


def test_open_voting_confirmation_then_refusal_in_words(client, cast, unchanged):
    study = services.study_create(designer=cast.alice, title="Empty")
    as_user(client, cast.alice)
    page = text_of(client.get(f"/studies/{study.pk}/phase/voting/"))
    assert "Open the vote?" in page
    assert "Opening the vote fixes the setup: attributes, metrics and experts can no longer be added" in page
    with unchanged():
        refused = client.post(f"/studies/{study.pk}/phase/voting/")
    assert refused.status_code == 409
    assert (
        "Refused: Voting cannot open yet: invite at least one expert; add at least one quality attribute."
        in text_of(refused)
    )


def test_close_voting_says_what_the_selection_will_be_then_does_it(client, cast, make_study):
    built = make_study(Phase.VOTING)
    as_user(client, cast.alice)
    home = client.get(f"/studies/{built.study.pk}/").content.decode()
    assert f'href="/studies/{built.study.pk}/phase/assessment/"' in home
    page = text_of(client.get(f"/studies/{built.study.pk}/phase/assessment/"))
    assert (
        "Closing the vote fixes the selection: these attributes and metrics will be selected: "
        "Accuracy, Consistency, Efficiency; metrics Success rate, AUC, Fold stdev, Training time. "
        "Experts can no longer change their votes"
    ) in page
    assert "Left out Flexibility" in page and "Left out Flexibility score" in page
    response = client.post(f"/studies/{built.study.pk}/phase/assessment/")
    assert response.status_code == 302 and response["Location"] == f"/studies/{built.study.pk}/"
    built.refresh()
    assert built.study.phase == Phase.ASSESSMENT
    selected = built.study.attributes.filter(is_selected=True)
    assert [a.name for a in selected] == ["Accuracy", "Consistency", "Efficiency"]
    assert "Voting is closed: the selection is fixed and the assessment is open." in text_of(client.get("/"))


def test_close_assessment_refused_names_who_is_missing_what(client, cast, make_study, unchanged):
    built = make_study(Phase.ASSESSMENT)
    services.prioritisation_set(
        expert=built.bob, method="direct", weights={"Accuracy": 5, "Consistency": 3, "Efficiency": 2}
    )
    as_user(client, cast.alice)
    confirm = text_of(client.get(f"/studies/{built.study.pk}/phase/closed/"))
    assert "Closing the assessment freezes every expert's priorities, acceptable ranges and peer weights" in confirm
    assert "bob: acceptable range for AUC; weights for fellow experts carol: prioritisation" in confirm
    with unchanged():
        refused = client.post(f"/studies/{built.study.pk}/phase/closed/")
    assert refused.status_code == 409
    assert (
        "Refused: Assessment cannot close, inputs are missing: bob: acceptable range for AUC, weights for fellow "
        "experts; carol: prioritisation of the attributes, acceptable range for AUC, weights for fellow experts."
    ) in text_of(refused)


def test_reopen_and_close_again(client, cast, make_study):
    built = make_study(Phase.CLOSED)
    launch(built, cast.alice)
    as_user(client, cast.alice)
    page = text_of(client.get(f"/studies/{built.study.pk}/phase/assessment/"))
    assert "Reopen the assessment?" in page
    assert "The 1 existing run keeps its results: each run works on a snapshot taken when it was launched." in page
    assert client.post(f"/studies/{built.study.pk}/phase/assessment/").status_code == 302
    assert Study.objects.get(pk=built.study.pk).phase == Phase.ASSESSMENT
    assert "Every expert has given every input." in text_of(client.get(f"/studies/{built.study.pk}/phase/closed/"))
    assert client.post(f"/studies/{built.study.pk}/phase/closed/").status_code == 302
    assert Study.objects.get(pk=built.study.pk).phase == Phase.CLOSED


def test_a_transition_not_open_from_this_phase_says_so(client, cast, make_study, unchanged):
    built = make_study(Phase.DRAFT)
    as_user(client, cast.alice)
    with unchanged():
        for method in ("get", "post"):
            response = getattr(client, method)(f"/studies/{built.study.pk}/phase/closed/")
            assert response.status_code == 409
            assert "The study is in the draft phase: it cannot move to closed from there." in text_of(response)


# --- deleting a study ----------------------------------------------------------------------------


def test_delete_asks_then_deletes_everything(client, cast, make_study):
    built = make_study(Phase.CLOSED)
    launch(built, cast.alice)
    path = f"/studies/{built.study.pk}/delete/"
    assert as_user(client, cast.bob).get(path).status_code == 403
    assert as_user(client, cast.charlie).get(path).status_code == 404
    page = text_of(as_user(client, cast.alice).get(path))
    assert "Delete “Choosing a classifier”?" in page
    assert (
        "4 attributes and 5 metrics; 2 candidates with their measurements; 2 experts with every vote, "
        "prioritisation, range and peer weight they gave; 1 validation run with its results;"
    ) in page
    assert Study.objects.filter(pk=built.study.pk).exists()
    response = client.post(path, follow=True)
    assert not Study.objects.filter(pk=built.study.pk).exists()
    assert not Run.objects.exists()
    assert "The study “Choosing a classifier” was deleted with everything in it." in text_of(response)


# --- runs -------------------------------------------------------------------------------------------


def test_runs_page_statuses_and_launch_refused_in_words(client, cast, make_study, unchanged):
    built = make_study(Phase.ASSESSMENT, inputs=True)
    path = f"/studies/{built.study.pk}/runs/"
    assert as_user(client, cast.charlie).get(path).status_code == 404
    assert client.post(path).status_code == 404
    bob = as_user(client, cast.bob)
    assert "The study's designer launches the runs" in text_of(bob.get(path))
    with unchanged():
        assert bob.post(path).status_code == 403
    as_user(client, cast.alice)
    assert "Runs need a closed study; this one is in the assessment phase." in text_of(client.get(path))
    with unchanged():
        refused = client.post(path)
    assert refused.status_code == 409
    assert not Run.objects.exists()
    assert (
        "The run was not launched: Validation runs need a closed study; this one is in the assessment phase. "
        "Close the assessment first."
    ) in text_of(refused)


def test_launch_then_the_list_polls_until_the_run_is_done(client, cast, make_study):
    built = make_study(Phase.CLOSED)
    as_user(client, cast.alice)
    path = f"/studies/{built.study.pk}/runs/"
    assert "No run yet." in text_of(client.get(path))
    response = client.post(path)
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    listing = client.get(path)
    raw = listing.content.decode()
    assert f'hx-get="/studies/{built.study.pk}/runs/status/" hx-trigger="every 2s"' in raw
    assert "<noscript>" in raw and f'<a href="{path}">Refresh</a>' in raw
    row = text_of(listing)
    assert f"Run {run.number} Queued alice" in row and "1e-09" in row
    assert 'name="htmx-config"' in raw and "vendor/htmx/htmx.min.js" in raw

    partial = client.get(f"/studies/{built.study.pk}/runs/status/")
    assert partial.status_code == 200 and "<html" not in partial.content.decode()
    assert 'hx-trigger="every 2s"' in partial.content.decode()
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    done = client.get(f"/studies/{built.study.pk}/runs/status/").content.decode()
    assert "hx-trigger" not in done and "Succeeded" in done
    assert f"{run.duration_seconds:.3f} s" in done
    assert as_user(client, cast.charlie).get(f"/studies/{built.study.pk}/runs/status/").status_code == 404


def test_runs_page_query_count_is_fixed(client, cast, make_study, django_assert_num_queries):
    built = make_study(Phase.CLOSED)
    as_user(client, cast.bob)
    path = f"/studies/{built.study.pk}/runs/"
    for runs in (1, 4):
        while Run.objects.count() < runs:
            launch(built, cast.alice)
        # session, user, the header's unread notifications, the study with its designer, my memberships, the
        # runs with who launched them
        with django_assert_num_queries(6):
            response = client.get(path)
        assert len(response.context["runs"]) == runs


@pytest.fixture
def vetoed_run(cast, make_study):
    """A succeeded run in which the candidate Stump is vetoed by both experts."""
    built = make_study(Phase.CLOSED)
    services.candidate_add(study=built.study, name="Stump")
    services.measurements_set(
        study=built.study,
        measurements=[
            {"candidate": "Stump", "metric": name, "value": value}
            for name, value in {
                "Success rate": 0.5,
                "AUC": 0.8,
                "Fold stdev": 0.1,
                "Training time": 1,
                "Flexibility score": 3,
            }.items()
        ],
    )
    run = launch(built, cast.alice)
    engine_services.run_execute(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED, run.error
    return built, run


def test_run_page_shows_the_stored_ranking_weights_and_influence(client, cast, vetoed_run):
    built, run = vetoed_run
    path = f"/runs/{run.pk}/"
    assert as_user(client, cast.charlie).get(path).status_code == 404
    assert client.get(f"/runs/{run.pk}/status/").status_code == 404
    assert as_user(client, cast.charlie).get("/runs/999999/").status_code == 404
    response = as_user(client, cast.carol).get(path)
    assert response.status_code == 200
    page = text_of(response)
    document = engine_selectors.results_document(run=run)
    first, second, stump = document["candidates"]
    assert stump["name"] == "Stump" and stump["vetoed"] and not first["vetoed"]
    assert (
        f"1 {first['name']} {significant(first['cef'])} {significant(first['weighted_score'])} not vetoed "
        f"2 {second['name']} {significant(second['cef'])} {significant(second['weighted_score'])} not vetoed "
        f"3 Stump {significant(stump['cef'])} {significant(stump['weighted_score'])} Vetoed "
        "For bob the least acceptable Success rate is 0.8, for carol 0.82; Stump measured 0.5."
    ) in page
    for weights in (document["attribute_weights"], document["metric_weights"]):
        consensus = " ".join(significant(weight) for weight in weights.values())
        assert f"{' '.join(weights)} Consensus {consensus}" in page
    influence = document["expert_influence"]
    assert f"Expert Influence bob {significant(influence['bob'])} carol {significant(influence['carol'])}" in page
    assert f'href="/api/v1/runs/{run.pk}/results/"' in response.content.decode()
    assert f"after {document['iterations']} iteration" in page
    assert "hx-trigger" not in response.content.decode()


def test_run_page_while_queued_polls_and_when_failed_says_why(client, cast, make_study):
    built = make_study(Phase.CLOSED)
    run = launch(built, cast.alice)
    as_user(client, cast.bob)
    queued = client.get(f"/runs/{run.pk}/").content.decode()
    assert f'hx-get="/runs/{run.pk}/status/" hx-trigger="every 2s" hx-swap="outerHTML"' in queued
    assert "Status: Queued" in text_of(client.get(f"/runs/{run.pk}/"))
    partial = client.get(f"/runs/{run.pk}/status/")
    assert "<html" not in partial.content.decode() and "Waiting for a worker to start it." in text_of(partial)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED, error="The inputs cannot be evaluated: boom.")
    failed = client.get(f"/runs/{run.pk}/status/")
    assert "hx-trigger" not in failed.content.decode()
    assert "The run failed. The inputs cannot be evaluated: boom." in text_of(failed)


def test_run_page_partial_loads_the_ranking_once_succeeded(client, cast, make_study):
    """Issue 19: the polled partial is the status alone, results never read;
    once the run has succeeded it loads the run page's live part (results
    and all) once, with a link for when it cannot."""
    built = make_study(Phase.CLOSED)
    run = launch(built, cast.alice)
    as_user(client, cast.alice)
    assert "Ranking" not in text_of(client.get(f"/runs/{run.pk}/status/"))
    engine_services.run_execute(run_id=run.pk)
    response = client.get(f"/runs/{run.pk}/status/")
    partial, raw = text_of(response), response.content.decode()
    assert "Status: Succeeded" in partial and "Ranking" not in partial
    assert "results" not in response.context and "every 2s" not in raw
    assert (
        f'<div id="run-live" class="run-live" hx-get="/runs/{run.pk}/" hx-select="#run-live" hx-trigger="load" '
        'hx-swap="outerHTML">'
    ) in raw
    assert f'Loading the results… <a href="/runs/{run.pk}/">Show the results</a>' in raw
    # what it loads: the page's live part, with the ranking
    page = client.get(f"/runs/{run.pk}/")
    live = SimpleNamespace(content=page.content[page.content.index(b'<div id="run-live"') :])
    assert "Ranking Candidates best first; equal CEFs share a rank. Rank" in text_of(live)


# The results pages' query counts and the never-recompute rule: tests/pages/test_results.py.


# --- issue 16, finding 10: My steps opens the next step; the grid's wording ---------------


def test_my_steps_tab_opens_the_next_step_to_do(client, cast, make_study):
    voting = make_study(Phase.VOTING, votes={"carol": {"attributes": [], "metrics": []}})
    as_user(client, cast.bob)
    home = client.get(f"/studies/{voting.study.pk}/").content.decode()
    assert f'href="/studies/{voting.study.pk}/my/"' in home
    assert f'href="/studies/{voting.study.pk}/my/votes/" aria-current' not in home
    # In voting, bob has voted: nothing is to do, the phase's step opens.
    assert client.get(f"/studies/{voting.study.pk}/my/")["Location"] == f"/studies/{voting.study.pk}/my/votes/"

    assessment = make_study(Phase.ASSESSMENT, title="Second")
    response = client.get(f"/studies/{assessment.study.pk}/my/")
    assert response.status_code == 302
    assert response["Location"] == f"/studies/{assessment.study.pk}/my/priorities/"


def test_my_steps_skips_the_steps_done(client, cast, make_study):
    built = make_study(Phase.ASSESSMENT, inputs=True)
    as_user(client, cast.carol)
    # Every step done: the first step of the assessment opens.
    assert client.get(f"/studies/{built.study.pk}/my/")["Location"] == f"/studies/{built.study.pk}/my/priorities/"
    # Priorities and ranges given, peer weights missing: the peer weights open.
    PeerWeight.objects.filter(rater=built.experts["carol"]).delete()
    assert client.get(f"/studies/{built.study.pk}/my/")["Location"] == f"/studies/{built.study.pk}/my/peer-weights/"


def test_my_steps_for_the_designer_who_is_no_expert_goes_to_the_refusal(client, cast, make_study):
    built = make_study(Phase.VOTING)
    as_user(client, cast.alice)
    assert client.get(f"/studies/{built.study.pk}/my/")["Location"] == f"/studies/{built.study.pk}/my/votes/"
    as_user(client, cast.charlie)
    assert client.get(f"/studies/{built.study.pk}/my/").status_code == 404


def test_the_designers_grid_says_the_expert_can_change_their_votes(client, cast, make_study):
    built = make_study(Phase.VOTING)
    grid = text_of(as_user(client, cast.alice).get(f"/studies/{built.study.pk}/"))
    assert "the expert can change them until voting closes" in grid
    assert "you can change them" not in grid
    mine = text_of(as_user(client, cast.bob).get(f"/studies/{built.study.pk}/"))
    assert "you can change them until voting closes" in mine
