"""Copying a study in the pages (issue 31, item 3): *Copy this study* on the
study home leads its designer to ``/studies/{id}/copy/``, which says what is
copied and what never is; *Start from a template* on the new-study page
copies any study the user designs. Both go to the copy's setup; a bad title
is a 400 naming the field, nothing written."""

import re

import pytest
from django.test import Client

from tests.pages.test_designer import body, client_for, form_errors
from tests.workspace.test_bundle_elicited import elicited_study
from workspace import services
from workspace.bundles import study_export_bundle
from workspace.models import Measurement, Membership, Phase, Study

pytestmark = pytest.mark.django_db

NOT_COPIED = (
    "<strong>Never copied: other people's inputs and the experts.</strong> The copy has no votes, "
    "prioritisations, ranges, peer weights, answers to elicitation questions, revision rounds or absences, and no "
    "experts: you invite them again from its Experts tab, and they give their inputs anew."
)


def copy_path(study: Study) -> str:
    return f"/studies/{study.pk}/copy/"


def the_copy(original: Study) -> Study:
    return Study.objects.exclude(pk=original.pk).get()


def test_the_home_offers_the_designer_a_copy(make_study, cast) -> None:
    built = make_study(Phase.CLOSED)
    home = body(client_for(cast.alice).get(f"/studies/{built.study.pk}/"))
    assert f'<a class="button" href="{copy_path(built.study)}">Copy this study…</a>' in home
    assert copy_path(built.study) not in body(client_for(cast.bob).get(f"/studies/{built.study.pk}/"))


def test_the_confirmation_says_what_is_copied_and_what_never_is(make_study, cast) -> None:
    built = make_study(Phase.CLOSED)
    response = client_for(cast.alice).get(copy_path(built.study))
    assert response.status_code == 200
    page = body(response)
    assert '<h2 id="copy-title">Copy “Choosing a classifier”</h2>' in page
    assert "The copy is a new study in the draft phase that you design, with this study's setup:" in page
    assert "<li>4 attributes and 5 metrics;</li>" in page
    assert "<li>2 candidates, with their measurements and the prediction sets as you choose below.</li>" in page
    assert NOT_COPIED in page
    assert 'value="Copy of Choosing a classifier"' in page
    assert re.search(r'<input type="checkbox" name="measurements"[^>]* checked', page)
    assert not re.search(r'<input type="checkbox" name="predictions"[^>]* checked', page)
    assert 'id="copy-elicited"' not in page  # no elicited metric in this study


def test_the_confirmation_names_the_elicited_metrics_that_need_the_sets(make_study, cast) -> None:
    built = elicited_study(make_study)
    page = body(client_for(cast.alice).get(copy_path(built.study)))
    assert (
        "The elicited metric AUC needs its questions made from a prediction set: without the prediction sets it "
        "becomes an ordinary metric, measured as any other."
    ) in page


def test_experts_get_403_outsiders_404_anonymous_the_log_in(make_study, cast, unchanged) -> None:
    built = make_study(Phase.CLOSED)
    path = copy_path(built.study)
    with unchanged():
        for method in ("get", "post"):
            expert = getattr(client_for(cast.bob), method)(path)
            assert expert.status_code == 403 and "Only the designer of this study can copy the study." in body(expert)
            assert getattr(client_for(cast.charlie), method)(path).status_code == 404
        anonymous = Client().post(path)
        assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/?next=")


def test_copying_lands_on_the_copys_setup(make_study, cast) -> None:
    built = make_study(Phase.CLOSED)
    client = client_for(cast.alice)
    response = client.post(copy_path(built.study), {"title": "Second panel", "measurements": "on"})
    copy = the_copy(built.study)
    assert response.status_code == 302 and response["Location"] == f"/studies/{copy.pk}/setup/"
    assert (copy.title, copy.phase, copy.designer) == ("Second panel", Phase.DRAFT, cast.alice)
    assert Measurement.objects.filter(study=copy).count() == Measurement.objects.filter(study=built.study).count()
    assert not Membership.objects.filter(study=copy, role="expert").exists()
    setup = body(client.get(response["Location"]))
    assert (
        "The study “Second panel” was made from “Choosing a classifier” with its setup and the measurements, in "
        "the draft phase and without anyone&#x27;s inputs. Invite the experts from its Experts tab."
    ) in setup


def test_an_empty_title_is_the_default_and_unchecked_measurements_stay_behind(make_study, cast) -> None:
    built = make_study(Phase.DRAFT)
    response = client_for(cast.alice).post(copy_path(built.study), {"title": ""})
    copy = the_copy(built.study)
    assert response["Location"] == f"/studies/{copy.pk}/setup/"
    assert copy.title == "Copy of Choosing a classifier"
    assert not Measurement.objects.filter(study=copy).exists()


@pytest.mark.parametrize(
    "title, message",
    [
        ("x" * 201, "Ensure this value has at most 200 characters (it has 201)."),
        ("Copy\u200bof", "must be a single line of visible text: it contains an invisible character (U+200B)"),
    ],
)
def test_a_bad_title_is_a_400_naming_the_field_and_nothing_is_written(make_study, cast, unchanged, title, message):
    built = make_study(Phase.DRAFT)
    with unchanged():
        response = client_for(cast.alice).post(copy_path(built.study), {"title": title, "measurements": "on"})
    assert response.status_code == 400
    assert form_errors(response, "form") == {"title": [message]}
    assert '<a href="#copy_title">Title of the new study</a>' in body(response)


# --- the new-study page: start from a template ---------------------------------------------


def test_the_new_study_page_offers_the_studies_the_user_designs(make_study, cast) -> None:
    mine = make_study(Phase.CLOSED)
    theirs = services.study_create(designer=cast.bob, title="Bob's own")
    services.expert_add(study=theirs, user=cast.alice)  # alice is an expert there: not hers to copy
    page = body(client_for(cast.alice).get("/studies/new/"))
    assert '<h2 id="template-title">Or start from a template</h2>' in page
    options = re.findall(r'<option value="(\d*)"[^>]*>([^<]*)</option>', page)
    assert options == [("", "Choose one of your studies"), (str(mine.study.pk), "Choosing a classifier")]
    assert "Never anyone's inputs nor the experts: you invite them again." in page
    # Someone who designs nothing is told how it will work.
    assert 'id="template-none"' in body(client_for(cast.charlie).get("/studies/new/"))


def test_starting_from_a_template_copies_it_with_the_options(make_study, cast) -> None:
    built = make_study(Phase.CLOSED)
    response = client_for(cast.alice).post(
        "/studies/new/", {"form": "template", "template": str(built.study.pk), "title": "From a template"}
    )
    copy = the_copy(built.study)
    assert response.status_code == 302 and response["Location"] == f"/studies/{copy.pk}/setup/"
    assert (copy.title, copy.phase) == ("From a template", Phase.DRAFT)
    exported, original = study_export_bundle(study=copy), study_export_bundle(study=built.study)
    assert exported["attributes"] == original["attributes"] and exported["metrics"] == original["metrics"]
    assert [c["measurements"] for c in exported["candidates"]] == [{}, {}]  # the box left unchecked
    assert exported["experts"] == [] and exported["priorities"] == {}


def test_a_template_the_user_does_not_design_or_a_bad_title_is_a_400(make_study, cast, unchanged) -> None:
    built = make_study(Phase.CLOSED)
    client = client_for(cast.bob)  # an expert of it, not its designer
    with unchanged():
        response = client.post("/studies/new/", {"form": "template", "template": str(built.study.pk)})
    assert response.status_code == 400
    assert form_errors(response, "template_form") == {
        "template": [f"Select a valid choice. {built.study.pk} is not one of the available choices."]
    }
    with unchanged():
        response = client_for(cast.alice).post(
            "/studies/new/", {"form": "template", "template": str(built.study.pk), "title": "Copy\u200bof"}
        )
    assert response.status_code == 400
    assert list(form_errors(response, "template_form")) == ["title"]
