"""The designer's pages with the Django test client: who may open what
(designer, expert read-only or 403, outsider 404), every form's errors
naming the field with nothing written, the CSV import, invitations by
link (single use, expiry, revocation, signup), reminders by e-mail, and
the number of queries of every page, pinned and unchanged when experts,
candidates and metrics grow."""

import io
import json
import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from workspace import invitations, services
from workspace.models import Invitation, Measurement, Membership, Metric, Phase, QualityAttribute, Study

User = get_user_model()


def client_for(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def body(response) -> str:
    return response.content.decode()


def form_errors(response, form: str) -> dict:
    return {name: list(errors) for name, errors in response.context[form].errors.items()}


# --- who may open what ------------------------------------------------------------------------


def study_paths(built) -> list[str]:
    s, a, m, c = built.study.pk, built.attributes["Accuracy"].pk, built.metrics["AUC"].pk, built.candidates["J48"].pk
    return [
        f"/studies/{s}/setup/",
        f"/studies/{s}/measurements/",
        f"/studies/{s}/experts/",
        f"/studies/{s}/setup/attributes/{a}/",
        f"/studies/{s}/setup/attributes/{a}/remove/",
        f"/studies/{s}/setup/metrics/{m}/",
        f"/studies/{s}/setup/metrics/{m}/remove/",
        f"/studies/{s}/setup/candidates/{c}/",
        f"/studies/{s}/setup/candidates/{c}/remove/",
        f"/studies/{s}/experts/bob/remove/",
        f"/studies/{s}/inputs/bob/",
    ]


POSTS = [
    "setup/",
    "setup/attributes/add/",
    "setup/metrics/add/",
    "setup/candidates/add/",
    "measurements/",
    "measurements/csv/",
    "experts/invite/",
    "experts/link/",
    "experts/remind/",
]


def test_outsiders_get_404_on_every_page_and_form_of_a_study(make_study, cast, unchanged) -> None:
    built = make_study(Phase.DRAFT)
    client = client_for(cast.charlie)
    with unchanged():
        for path in study_paths(built):
            assert client.get(path).status_code == 404, path
        for action in POSTS:
            assert client.post(f"/studies/{built.study.pk}/{action}", {"title": "x"}).status_code == 404, action


def test_anonymous_visitors_are_sent_to_log_in(make_study) -> None:
    built = make_study(Phase.DRAFT)
    for path in ["/studies/new/", *study_paths(built)]:
        response = Client().get(path)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next="), path


def test_experts_read_the_setup_and_measurements_and_get_403_on_every_change(make_study, cast, unchanged) -> None:
    built = make_study(Phase.DRAFT)
    client = client_for(cast.bob)
    setup = client.get(f"/studies/{built.study.pk}/setup/")
    assert setup.status_code == 200
    assert "Success rate" in body(setup) and "J48 learner" in body(setup)
    assert "<form" not in body(setup).split('id="study"')[1]  # nothing to submit
    measurements = client.get(f"/studies/{built.study.pk}/measurements/")
    assert measurements.status_code == 200
    assert "<input" not in body(measurements).split("measurement-table")[1].split("</table>")[0]
    assert "0.847" in body(measurements)
    with unchanged():
        for path in study_paths(built)[2:]:
            response = client.get(path)
            assert response.status_code == 403, path
            assert "Only the designer of this study can" in body(response)
        for action in POSTS:
            assert client.post(f"/studies/{built.study.pk}/{action}", {"title": "x"}).status_code == 403, action


def test_the_designer_opens_every_page(make_study, cast) -> None:
    built = make_study(Phase.DRAFT)
    client = client_for(cast.alice)
    for path in ["/studies/new/", *study_paths(built)]:
        assert client.get(path).status_code == 200, path


# --- /studies/new/ ----------------------------------------------------------------------------------


def test_creating_a_study_redirects_to_its_home(cast) -> None:
    client = client_for(cast.alice)
    response = client.post(
        "/studies/new/",
        {
            "form": "create",
            "title": "  Picking a learner ",
            "description": "for triage",
            "attribute_threshold": "2",
            "metric_threshold": "1",
        },
    )
    study = Study.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/studies/{study.pk}/"
    assert (study.title, study.description, study.attribute_threshold, study.metric_threshold) == (
        "Picking a learner",
        "for triage",
        2,
        1,
    )
    assert Membership.objects.get(study=study).role == "designer"


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"title": "", "attribute_threshold": "1", "metric_threshold": "0"}, "title", "This field is required."),
        ({"title": "x", "attribute_threshold": "-1", "metric_threshold": "0"}, "attribute_threshold", "greater than"),
        ({"title": "x", "attribute_threshold": "1", "metric_threshold": "many"}, "metric_threshold", "whole number"),
        ({"title": "x" * 201, "attribute_threshold": "1", "metric_threshold": "0"}, "title", "at most 200"),
    ],
)
def test_study_form_errors_name_the_field(cast, unchanged, data, field, message) -> None:
    with unchanged():
        response = client_for(cast.alice).post("/studies/new/", {"form": "create", **data})
    assert response.status_code == 200
    errors = form_errors(response, "create_form")
    assert list(errors) == [field] and message in errors[field][0]


def upload(content: bytes, name: str = "study.json") -> io.BytesIO:
    handle = io.BytesIO(content)
    handle.name = name
    return handle


def test_importing_a_bundle_invites_the_other_experts(cast, case_study_bundle) -> None:
    client = client_for(cast.alice)
    response = client.post("/studies/new/", {"form": "import", "bundle": upload(case_study_bundle)})
    study = Study.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/studies/{study.pk}/"
    assert study.designer == cast.alice and study.attributes.count() == 4
    invited = set(Invitation.objects.filter(study=study).values_list("username", flat=True))
    assert invited == {"statistician", "informatician", "researcher", "clinician"}
    assert not Membership.objects.filter(study=study, role="expert").exists()


@pytest.fixture
def case_study_bundle(case_study) -> bytes:
    """The case study as a draft without a designer: any user may import it."""
    draft = {
        key: value
        for key, value in case_study.items()
        if key not in ("votes", "priorities", "ranges", "peer_weights", "designer")
    }
    return json.dumps({**draft, "phase": "draft"}).encode()


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"\xff\xfe not utf-8", "the file is not UTF-8 text"),
        (b"{not json", "the file is not valid JSON"),
        (b"[1, 2]", "must hold a JSON object"),
        (b"[" * 40 + b"]" * 40, "nested deeper than 32 levels"),
    ],
)
def test_a_bad_bundle_file_is_refused_naming_the_field(cast, unchanged, content, expected) -> None:
    with unchanged():
        response = client_for(cast.alice).post("/studies/new/", {"form": "import", "bundle": upload(content)})
    assert response.status_code == 200
    errors = form_errors(response, "bundle_form")
    assert list(errors) == ["bundle"] and expected in errors["bundle"][0]


def test_a_bundle_the_import_refuses_lists_each_problem_at_its_path(cast, unchanged, case_study_bundle) -> None:
    bundle = json.loads(case_study_bundle)
    bundle["metrics"][1]["default_range"] = [0.05, 0.15]  # lower is better: backwards
    with unchanged():
        response = client_for(cast.alice).post(
            "/studies/new/", {"form": "import", "bundle": upload(json.dumps(bundle).encode())}
        )
    assert response.status_code == 200
    assert response.context["bundle_errors"] == [
        "metrics[1].default_range: lower is better, so the least acceptable value (0.05) must be above the desired "
        "value (0.15)"
    ]
    assert "bundle" in form_errors(response, "bundle_form")


def test_a_non_staff_import_leaves_out_other_experts_inputs_and_says_so(cast, case_study) -> None:
    """Whoever the bundle names as its designer ("designer"), alice designs
    the study; the experts' inputs are left out, the study a draft."""
    client = client_for(cast.alice)
    response = client.post("/studies/new/", {"form": "import", "bundle": upload(json.dumps(case_study).encode())})
    study = Study.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/studies/{study.pk}/"
    assert (study.phase, study.designer) == (Phase.DRAFT, cast.alice)
    page = body(client.get(response["Location"]))
    assert (
        "The inputs of 4 experts (statistician, informatician, researcher, clinician) were left out: only staff "
        "can import inputs entered by someone else. The study was imported as a draft"
    ) in page
    assert "The bundle named designer as its designer; you design the imported study." in page


# --- /studies/{id}/setup/ -----------------------------------------------------------------------------


def test_attributes_from_the_catalogue_and_written(make_study, cast) -> None:
    study = services.study_create(designer=cast.alice, title="Fresh")
    client = client_for(cast.alice)
    response = client.post(
        f"/studies/{study.pk}/setup/attributes/add/",
        {"form": "catalogue", "name": "Interpretability", "kind": "complementary"},
    )
    assert response.status_code == 302 and response["Location"] == f"/studies/{study.pk}/setup/#attributes"
    client.post(
        f"/studies/{study.pk}/setup/attributes/add/",
        {"name": "Robustness", "kind": "main", "description": "keeps working"},
    )
    rows = list(QualityAttribute.objects.filter(study=study).values_list("name", "kind", "description"))
    assert rows == [
        ("Interpretability", "complementary", "able to be explained, its results accounted for"),
        ("Robustness", "main", "keeps working"),
    ]
    page = body(client.get(f"/studies/{study.pk}/setup/"))
    # The catalogue offers only what the study lacks.
    assert 'Add<span class="visually-hidden"> Accuracy</span> as main' in page
    assert 'Add<span class="visually-hidden"> Interpretability</span> as main' not in page


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"name": "", "kind": "main"}, "name", "This field is required."),
        ({"name": "Accuracy", "kind": "main"}, "name", "'Accuracy' already exists in this study"),
        ({"name": "New", "kind": "sometimes"}, "kind", "Select a valid choice"),
        ({"form": "catalogue", "name": "Beauty", "kind": "main"}, "name", "Select a valid choice"),
        ({"form": "catalogue", "name": "Accuracy", "kind": "main"}, "name", "already exists"),
    ],
)
def test_attribute_form_errors_name_the_field(make_study, cast, unchanged, data, field, message) -> None:
    built = make_study(Phase.DRAFT)
    with unchanged():
        response = client_for(cast.alice).post(f"/studies/{built.study.pk}/setup/attributes/add/", data)
    assert response.status_code == 200
    form = "catalogue_form" if data.get("form") == "catalogue" else "attribute_form"
    errors = form_errors(response, form)
    assert list(errors) == [field] and message in errors[field][0]


def test_adding_and_editing_a_metric(make_study, cast) -> None:
    built = make_study(Phase.DRAFT)
    client = client_for(cast.alice)
    response = client.post(
        f"/studies/{built.study.pk}/setup/metrics/add/",
        {
            "attribute": built.attributes["Efficiency"].pk,
            "name": "Memory",
            "better": "lower",
            "unit": "MB",
            "least_acceptable": "512",
            "desired": "64",
        },
    )
    assert response.status_code == 302
    metric = Metric.objects.get(name="Memory")
    assert (metric.attribute.name, metric.better, metric.unit, metric.default_range) == (
        "Efficiency",
        "lower",
        "MB",
        (512.0, 64.0),
    )
    response = client.post(
        f"/studies/{built.study.pk}/setup/metrics/{metric.pk}/",
        {
            "attribute": built.attributes["Accuracy"].pk,
            "name": "Memory use",
            "better": "lower",
            "unit": "MB",
            "least_acceptable": "",
            "desired": "",
        },
    )
    assert response.status_code == 302
    metric.refresh_from_db()
    assert (metric.name, metric.attribute.name, metric.default_range) == ("Memory use", "Accuracy", None)


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"name": ""}, "name", "This field is required."),
        ({"name": "AUC"}, "name", "'AUC' already exists in this study"),
        ({"attribute": "999999"}, "attribute", "Select a valid choice"),
        ({"better": "sideways"}, "better", "Select a valid choice"),
        ({"least_acceptable": "0.8", "desired": ""}, "desired", "give both values of the default range, or neither"),
        ({"least_acceptable": "", "desired": "0.9"}, "least_acceptable", "give both values"),
        ({"least_acceptable": "high", "desired": "0.9"}, "least_acceptable", "not a number ('high')"),
        (
            {"least_acceptable": "0.9", "desired": "0.8"},
            "least_acceptable",
            "higher is better, so the least acceptable",
        ),
        ({"least_acceptable": "0.8", "desired": "0.8"}, "least_acceptable", "must differ"),
    ],
)
def test_metric_form_errors_name_the_field(make_study, cast, unchanged, change, field, message) -> None:
    built = make_study(Phase.DRAFT)
    data = {
        "attribute": built.attributes["Accuracy"].pk,
        "name": "Recall",
        "better": "higher",
        "unit": "",
        "least_acceptable": "",
        "desired": "",
        **change,
    }
    with unchanged():
        response = client_for(cast.alice).post(f"/studies/{built.study.pk}/setup/metrics/add/", data)
    assert response.status_code == 200
    errors = form_errors(response, "metric_form")
    assert list(errors) == [field] and message in errors[field][0], errors


def test_candidates_change_in_any_phase_and_their_errors_name_the_field(make_study, cast, unchanged) -> None:
    built = make_study(Phase.CLOSED)
    client = client_for(cast.alice)
    with unchanged():
        response = client.post(f"/studies/{built.study.pk}/setup/candidates/add/", {"name": "JRip"})
        assert form_errors(response, "candidate_form") == {"name": ["candidate 'JRip' already exists in this study"]}
        response = client.post(
            f"/studies/{built.study.pk}/setup/candidates/{built.candidates['J48'].pk}/", {"name": "  "}
        )
        assert form_errors(response, "form") == {"name": ["This field is required."]}
    client.post(f"/studies/{built.study.pk}/setup/candidates/add/", {"name": "IBk", "description": "k-NN"})
    assert built.study.candidates.filter(name="IBk", description="k-NN").exists()


def test_study_form_saves_and_its_errors_name_the_field(make_study, cast, unchanged) -> None:
    built = make_study(Phase.DRAFT)
    client = client_for(cast.alice)
    with unchanged():
        response = client.post(
            f"/studies/{built.study.pk}/setup/",
            {"title": "", "description": "", "attribute_threshold": "10001", "metric_threshold": "0"},
        )
        errors = form_errors(response, "study_form")
        assert set(errors) == {"title", "attribute_threshold"}
        assert "10000" in errors["attribute_threshold"][0]
    response = client.post(
        f"/studies/{built.study.pk}/setup/",
        {"title": "Renamed", "description": "d", "attribute_threshold": "2", "metric_threshold": "1"},
    )
    assert response.status_code == 302
    built.study.refresh_from_db()
    assert (built.study.title, built.study.attribute_threshold, built.study.metric_threshold) == ("Renamed", 2, 1)


def test_after_voting_closes_thresholds_and_attributes_are_read_only_with_the_reason(make_study, cast) -> None:
    built = make_study(Phase.ASSESSMENT)
    client = client_for(cast.alice)
    page = client.get(f"/studies/{built.study.pk}/setup/")
    reason = "is only possible in the draft phase; the study is in the assessment phase"
    assert f"Changing attributes {reason}" in body(page)
    assert "Add attribute" not in body(page) and "Add metric" not in body(page)
    assert page.context["study_form"].fields["attribute_threshold"].disabled
    # The thresholds keep their values whatever is posted; the title changes.
    client.post(
        f"/studies/{built.study.pk}/setup/",
        {"title": "Still open to a rename", "description": "", "attribute_threshold": "5", "metric_threshold": "5"},
    )
    built.study.refresh_from_db()
    assert (built.study.title, built.study.attribute_threshold) == ("Still open to a rename", 1)
    edit = client.get(f"/studies/{built.study.pk}/setup/attributes/{built.attributes['Accuracy'].pk}/")
    assert f"Changing attributes {reason}" in body(edit)
    assert all(field.disabled for field in edit.context["form"].fields.values())


def test_in_voting_only_a_metric_default_range_changes(make_study, cast, unchanged) -> None:
    built = make_study(Phase.VOTING)
    metric = built.metrics["AUC"]
    client = client_for(cast.alice)
    path = f"/studies/{built.study.pk}/setup/metrics/{metric.pk}/"
    response = client.post(path, {"name": "Renamed", "least_acceptable": "0.7", "desired": "0.95"})
    assert response.status_code == 302
    metric.refresh_from_db()
    assert (metric.name, metric.default_range) == ("AUC", (0.7, 0.95))
    with unchanged():
        response = client.post(path, {"least_acceptable": "0.95", "desired": "0.7"})
    assert "higher is better" in form_errors(response, "form")["least_acceptable"][0]


def test_removal_asks_first_then_removes_what_it_said(make_study, cast) -> None:
    built = make_study(Phase.DRAFT)
    client = client_for(cast.alice)
    path = f"/studies/{built.study.pk}/setup/attributes/{built.attributes['Accuracy'].pk}/remove/"
    confirm = client.get(path)
    assert confirm.context["consequences"] == [
        "Its 2 metrics go with it: Success rate, AUC.",
        "4 measured values of those metrics are deleted.",
    ]
    assert QualityAttribute.objects.filter(name="Accuracy").exists()
    assert client.post(path).status_code == 302
    assert not QualityAttribute.objects.filter(name="Accuracy").exists()
    assert not Metric.objects.filter(name__in=["Success rate", "AUC"]).exists()


def test_removal_outside_the_draft_is_refused_with_the_reason(make_study, cast, unchanged) -> None:
    built = make_study(Phase.VOTING)
    with unchanged():
        response = client_for(cast.alice).post(
            f"/studies/{built.study.pk}/setup/metrics/{built.metrics['AUC'].pk}/remove/"
        )
    assert response.status_code == 409
    assert response.context["refusal"] == (
        "Removing metrics is only possible in the draft phase; the study is in the voting phase"
    )


def test_unknown_setup_kinds_and_items_are_404(make_study, cast) -> None:
    built = make_study(Phase.DRAFT)
    other = make_study(Phase.DRAFT, title="Another")
    client = client_for(cast.alice)
    assert client.get(f"/studies/{built.study.pk}/setup/widgets/1/").status_code == 404
    # An item of another study, even one's own, is not found through this one.
    assert client.get(f"/studies/{built.study.pk}/setup/candidates/{other.candidates['J48'].pk}/").status_code == 404


# --- /studies/{id}/measurements/ ----------------------------------------------------------------------


def cell(built, candidate: str, metric: str) -> str:
    return f"cell-{built.candidates[candidate].pk}-{built.metrics[metric].pk}"


def table_data(built, **changes: str) -> dict:
    data = {
        cell(built, c, m): str(v)
        for c, values in {
            "J48": {
                "Success rate": 0.847,
                "AUC": 0.88,
                "Fold stdev": 0.106,
                "Training time": 4.1,
                "Flexibility score": 7,
            },
            "JRip": {
                "Success rate": 0.865,
                "AUC": 0.9,
                "Fold stdev": 0.1,
                "Training time": 6.3,
                "Flexibility score": 5,
            },
        }.items()
        for m, v in values.items()
    }
    return {**data, **changes}


def test_the_table_saves_changed_cells(make_study, cast) -> None:
    built = make_study(Phase.DRAFT)
    client = client_for(cast.alice)
    response = client.post(
        f"/studies/{built.study.pk}/measurements/", table_data(built, **{cell(built, "JRip", "AUC"): "0.91"})
    )
    assert response.status_code == 302
    assert Measurement.objects.get(candidate__name="JRip", metric__name="AUC").value == 0.91
    assert Measurement.objects.get(candidate__name="J48", metric__name="AUC").value == 0.88


def test_table_errors_name_each_cell_and_nothing_is_saved(make_study, cast, unchanged) -> None:
    built = make_study(Phase.DRAFT)
    data = table_data(
        built,
        **{
            cell(built, "JRip", "AUC"): "0.95",
            cell(built, "J48", "AUC"): "lots",
            cell(built, "JRip", "Training time"): "",
        },
    )
    with unchanged():
        response = client_for(cast.alice).post(f"/studies/{built.study.pk}/measurements/", data)
    errors = form_errors(response, "table_form")
    assert errors == {
        cell(built, "J48", "AUC"): ["not a number ('lots')"],
        cell(built, "JRip", "Training time"): ["a measured value can be changed, not removed: give a number"],
    }
    page = body(response)
    assert '<a href="#id_' + cell(built, "J48", "AUC") + '">AUC of J48</a>' in page


BAD_CSV = [
    ("candidate,metric,value\nJ48,AUC,0.5\nJRip,AUC,abc\n", "line 3, column value: not a number ('abc')"),
    ("candidate,metric,value\nC4.5,AUC,0.5\n", "line 2, column candidate: no candidate named 'C4.5' in this study"),
    ("candidate,metric,value\nJ48,Speed,0.5\n", "line 2, column metric: no metric named 'Speed' in this study"),
    ("candidate,AUC,Speed\nJ48,0.5,1\n", "line 1, column Speed: no metric named 'Speed' in this study"),
    ("candidate,AUC\nJ48,0.5\nJRip,0.6,0.7\n", "line 3: 3 values, but the header has 2 columns"),
    ("candidate,AUC\nJ48,0.5\n\nJ48,0.6\n", "line 4: J48 / AUC is already given on line 2"),
    ("metric,candidate,value\nAUC,J48,0.5\n", "line 1: the first column must be 'candidate'"),
    (
        'candidate,Success rate\nJ48,0.8\nJRip,"0,86"\n',
        "line 3, column Success rate: not a number ('0,86'); use a point",
    ),
    ("candidate,Training time\nJ48,1e400\n", "line 2, column Training time: too large to be a number ('1e400')"),
    ("candidate,metric,value\n", "the CSV has a header but no measurements"),
    ("candidate,metric,value\nJ48,AUC,\n", "line 2, column value: empty"),
]


@pytest.mark.parametrize(("text", "expected"), BAD_CSV)
def test_bad_csv_is_refused_with_its_line_and_nothing_is_written(make_study, cast, unchanged, text, expected) -> None:
    built = make_study(Phase.DRAFT)
    with unchanged():
        response = client_for(cast.alice).post(f"/studies/{built.study.pk}/measurements/csv/", {"csv_text": text})
    assert response.status_code == 200
    assert any(error.startswith(expected) for error in response.context["csv_errors"]), response.context["csv_errors"]
    assert "csv_text" in form_errors(response, "csv_form")
    assert expected.replace("'", "&#x27;") in body(response)


def test_csv_pasted_or_uploaded_is_saved_whole(make_study, cast) -> None:
    built = make_study(Phase.DRAFT)
    client = client_for(cast.alice)
    response = client.post(
        f"/studies/{built.study.pk}/measurements/csv/",
        {"csv_text": "candidate\tAUC\tTraining time\nJ48\t0.5\t\nJRip\t0.6\t9\n"},
    )
    assert response.status_code == 302
    values = Measurement.objects.filter(metric__name__in=["AUC", "Training time"]).values_list("value", flat=True)
    assert sorted(values) == [0.5, 0.6, 4.1, 9.0]  # J48's time untouched (its cell was empty)
    response = client.post(
        f"/studies/{built.study.pk}/measurements/csv/",
        {"csv_file": upload(b"candidate,metric,value\nJ48,AUC,0.77\n", "m.csv")},
    )
    assert response.status_code == 302
    assert Measurement.objects.get(candidate__name="J48", metric__name="AUC").value == 0.77


def test_csv_form_needs_exactly_one_source(make_study, cast, unchanged) -> None:
    built = make_study(Phase.DRAFT)
    client = client_for(cast.alice)
    path = f"/studies/{built.study.pk}/measurements/csv/"
    with unchanged():
        assert form_errors(client.post(path, {"csv_text": " "}), "csv_form") == {
            "csv_text": ["paste CSV here, or choose a file below"]
        }
        both = client.post(path, {"csv_text": "candidate,AUC\nJ48,1\n", "csv_file": upload(b"candidate,AUC\nJ48,1\n")})
        assert list(form_errors(both, "csv_form")) == ["csv_file"]
        bad = client.post(path, {"csv_file": upload(b"candidate,AUC\nJ\xe448,1\n")})
        assert bad.context["csv_errors"] == ["the file is not UTF-8 text (byte 16 is not valid UTF-8)"]


# --- /studies/{id}/experts/ and invitations -----------------------------------------------------------


def test_inviting_by_username_answers_the_same_whether_the_account_exists(make_study, cast) -> None:
    study = services.study_create(designer=cast.alice, title="Fresh")
    client = client_for(cast.alice)
    answers = []
    for username in ("bob", "nobody-by-this-name"):
        response = client.post(f"/studies/{study.pk}/experts/invite/", {"username": username}, follow=True)
        answers.append([str(message).replace(username, "NAME") for message in response.context["messages"]])
    assert answers[0] == answers[1]
    assert set(Invitation.objects.filter(study=study).values_list("username", flat=True)) == {
        "bob",
        "nobody-by-this-name",
    }
    assert not Membership.objects.filter(study=study, role="expert").exists()


@pytest.mark.parametrize(
    ("username", "message"),
    [
        ("", "This field is required."),
        ("has space", "'has space' is not a valid username"),
        ("bob", "bob is already an expert of this study"),
    ],
)
def test_invite_form_errors_name_the_field(make_study, cast, unchanged, username, message) -> None:
    built = make_study(Phase.DRAFT)
    with unchanged():
        response = client_for(cast.alice).post(f"/studies/{built.study.pk}/experts/invite/", {"username": username})
    errors = form_errors(response, "invite_form")
    assert list(errors) == ["username"] and message in errors["username"][0]


def test_invitations_are_refused_after_the_draft_with_the_reason(make_study, cast, unchanged) -> None:
    built = make_study(Phase.VOTING)
    client = client_for(cast.alice)
    page = client.get(f"/studies/{built.study.pk}/experts/")
    assert "Inviting an expert is only possible in the draft phase" in body(page)
    with unchanged():
        response = client.post(f"/studies/{built.study.pk}/experts/link/")
    assert response.context["link_error"].startswith("Inviting an expert is only possible in the draft phase")


def new_link(client: Client, study: Study) -> str:
    response = client.post(f"/studies/{study.pk}/experts/link/")
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    link = response.context["new_link"]
    assert link.startswith("http://testserver/invitations/")
    return link.removeprefix("http://testserver")


def signup(path: str, username: str = "dana", password: str = "a-fresh-passphrase-31", confirm: str | None = None):
    client = Client()
    response = client.post(path, {"username": username, "password1": password, "password2": confirm or password})
    return client, response


def test_a_newcomer_signs_up_through_the_link_and_joins(make_study, cast) -> None:
    built = make_study(Phase.DRAFT)
    path = new_link(client_for(cast.alice), built.study)
    page = Client().get(path)
    assert page.status_code == 200 and "Choosing a classifier" in body(page) and "alice" in body(page)
    assert "/accounts/login/?next=" + path.replace("/", "%2F") in body(page)
    client, response = signup(path)
    assert response.status_code == 302 and response["Location"] == f"/studies/{built.study.pk}/"
    dana = User.objects.get(username="dana")
    assert dana.check_password("a-fresh-passphrase-31")
    membership = Membership.objects.get(study=built.study, user=dana)
    assert (membership.role, membership.status) == ("expert", "active")
    invitation = Invitation.objects.get(study=built.study)
    assert (invitation.status, invitation.accepted_by) == ("accepted", dana)
    # Logged in as dana: the study is theirs to read.
    assert client.get(f"/studies/{built.study.pk}/setup/").status_code == 200


def test_joining_by_link_locks_only_the_invitation_row(make_study, cast) -> None:
    """The journey on PostgreSQL answered 500 here: the invitation was
    locked together with its outer-joined membership, which PostgreSQL
    refuses (FOR UPDATE on the nullable side of an outer join). Only the
    invitation's row is locked now; SQLite takes no row locks at all."""
    built = make_study(Phase.DRAFT)
    path = new_link(client_for(cast.alice), built.study)
    with CaptureQueriesContext(connection) as queries:
        _client, response = signup(path)
    assert response.status_code == 302 and response["Location"] == f"/studies/{built.study.pk}/"
    assert Membership.objects.get(study=built.study, user__username="dana").status == "active"
    locks = [q["sql"] for q in queries if "FOR UPDATE" in q["sql"] and "workspace_invitation" in q["sql"]]
    if connection.features.has_select_for_update:
        assert locks and all(sql.endswith('FOR UPDATE OF "workspace_invitation"') for sql in locks), locks
    else:
        assert locks == []


def test_the_link_works_once(make_study, cast, unchanged) -> None:
    built = make_study(Phase.DRAFT)
    path = new_link(client_for(cast.alice), built.study)
    signup(path)
    with unchanged():
        again = Client().get(path)
        assert again.status_code == 410
        assert "This invitation link has already been used." in body(again)
        _client, response = signup(path, username="erin")
        assert response.status_code == 410
        accepted_by_bob = client_for(cast.charlie).post(path)
        assert accepted_by_bob.status_code == 410
    assert not User.objects.filter(username="erin").exists()


def test_an_expired_link_says_so(make_study, cast, unchanged) -> None:
    built = make_study(Phase.DRAFT)
    path = new_link(client_for(cast.alice), built.study)
    Invitation.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    with unchanged():
        response = Client().get(path)
        assert response.status_code == 410 and "This invitation expired on" in body(response)
        assert signup(path)[1].status_code == 410


def test_a_revoked_link_says_so(make_study, cast) -> None:
    built = make_study(Phase.DRAFT)
    client = client_for(cast.alice)
    path = new_link(client, built.study)
    invitation = Invitation.objects.get()
    revoke = f"/studies/{built.study.pk}/experts/invitations/{invitation.pk}/revoke/"
    assert "The link stops working" in body(client.get(revoke))
    assert Invitation.objects.get().status == "pending"
    assert client.post(revoke).status_code == 302
    response = Client().get(path)
    assert response.status_code == 410
    assert "This invitation was revoked by the study&#x27;s designer." in body(response)
    assert client.post(revoke).status_code == 409  # already answered


def test_an_unknown_key_is_404(db) -> None:
    response = Client().get("/invitations/no-such-key/")
    assert response.status_code == 404 and "No invitation has this link" in body(response)


@pytest.mark.parametrize(
    ("username", "password", "confirm", "field", "message"),
    [
        ("bob", "a-fresh-passphrase-31", None, "username", "this username is taken: choose another"),
        ("BOB", "a-fresh-passphrase-31", None, "username", "this username is taken"),
        ("ｂｏｂ", "a-fresh-passphrase-31", None, "username", "this username is taken"),
        ("has space", "a-fresh-passphrase-31", None, "username", "Enter a valid username"),
        ("dana", "short", None, "password2", "too short"),
        ("dana", "12345678901", None, "password2", "entirely numeric"),
        ("dana", "a-fresh-passphrase-31", "another-one-entirely", "password2", "didn’t match"),
    ],
)
def test_signup_errors_name_the_field(make_study, cast, unchanged, username, password, confirm, field, message) -> None:
    built = make_study(Phase.DRAFT)
    path = new_link(client_for(cast.alice), built.study)
    with unchanged():
        _client, response = signup(path, username, password, confirm)
    assert response.status_code == 200
    errors = form_errors(response, "form")
    assert field in errors and message in " ".join(errors[field]), errors


def test_a_logged_in_user_accepts_or_declines(make_study, cast) -> None:
    built = make_study(Phase.DRAFT, experts=())
    designer = client_for(cast.alice)
    path = new_link(designer, built.study)
    charlie = client_for(cast.charlie)
    page = charlie.get(path)
    assert "You join as <strong>charlie</strong>" in body(page)
    decline = charlie.get(path + "decline/")
    assert "The link stops working" in body(decline)
    assert charlie.post(path + "decline/").status_code == 302
    assert Invitation.objects.get().status == "declined"
    assert charlie.get(path).status_code == 410

    path = new_link(designer, built.study)
    response = charlie.post(path)
    assert response.status_code == 302 and response["Location"] == f"/studies/{built.study.pk}/"
    assert Membership.objects.filter(study=built.study, user=cast.charlie, role="expert").exists()


def test_an_expert_opening_a_link_is_told_they_are_one(make_study, cast, unchanged) -> None:
    built = make_study(Phase.DRAFT)
    path = new_link(client_for(cast.alice), built.study)
    bob = client_for(cast.bob)
    assert "are already an expert of this study" in body(bob.get(path))
    with unchanged():
        response = bob.post(path)
    assert response.status_code == 409 and "You are already an expert of this study" in body(response)


def test_a_link_after_the_draft_says_why_it_cannot_be_used(make_study, cast) -> None:
    built = make_study(Phase.DRAFT)
    path = new_link(client_for(cast.alice), built.study)
    services.study_open_voting(study=built.study)
    response = Client().get(path)
    assert response.status_code == 410
    assert "Joining a study as an expert is only possible in the draft phase" in body(response)
    assert response.context["form"] is None


def test_removing_an_expert_says_their_inputs_go_then_removes_them(make_study, cast) -> None:
    built = make_study(Phase.DRAFT)
    client = client_for(cast.alice)
    path = f"/studies/{built.study.pk}/experts/bob/remove/"
    confirm = client.get(path)
    assert any("Everything they entered goes with them" in line for line in confirm.context["consequences"])
    assert Membership.objects.filter(study=built.study, user=cast.bob).exists()
    assert client.post(path).status_code == 302
    assert not Membership.objects.filter(study=built.study, user=cast.bob).exists()
    assert client.get(path).status_code == 404


def test_removing_an_expert_after_the_draft_is_refused_with_the_reason(make_study, cast, unchanged) -> None:
    built = make_study(Phase.ASSESSMENT, inputs=True)
    with unchanged():
        response = client_for(cast.alice).post(f"/studies/{built.study.pk}/experts/bob/remove/")
    assert response.context["refusal"].startswith("Removing an expert is only possible in the draft phase")


# --- reminders ------------------------------------------------------------------------------------------


def test_reminders_are_e_mailed_with_what_each_expert_still_has_to_give(
    make_study, cast, django_capture_on_commit_callbacks, eager_celery
) -> None:
    built = make_study(Phase.ASSESSMENT)
    User.objects.filter(username="bob").update(email="bob@example.org")
    client = client_for(cast.alice)
    # Sent by the notifications' task once the request's change commits, never in the request.
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            f"/studies/{built.study.pk}/experts/remind/",
            {"experts": ["bob", "carol"], "note": "Before Friday, please."},
        )
        assert mail.outbox == []
    assert response.status_code == 200
    report = body(response)
    assert "Reminder being e-mailed to bob (bob@example.org)." in report
    assert response.context["sent"].unreached == [("carol", "no e-mail address")]
    assert "<li><strong>carol</strong>: no e-mail address</li>" in report
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.to == ["bob@example.org"] and message.subject == "Reminder: Choosing a classifier"
    assert f"http://testserver/studies/{built.study.pk}/" in message.body
    assert "- prioritisation of the attributes" in message.body
    assert "Before Friday, please." in message.body


def test_a_reminder_the_mail_server_refuses_is_reported(
    make_study, cast, monkeypatch, django_capture_on_commit_callbacks, eager_celery
) -> None:
    built = make_study(Phase.VOTING)
    User.objects.filter(username__in=["bob", "carol"]).update(email="someone@example.org")

    def refuse(*args, **kwargs) -> None:
        raise ConnectionRefusedError("connection refused")

    monkeypatch.setattr("django.core.mail.EmailMessage.send", refuse)
    client = client_for(cast.alice)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(f"/studies/{built.study.pk}/experts/remind/", {"experts": ["bob"]})
    # The task gave up after its tries: the experts page says it.
    page = body(client.get(f"/studies/{built.study.pk}/experts/"))
    assert "<strong>not reached</strong>, the mail server refused the message (connection refused)" in page


def test_reminder_form_needs_an_expert(make_study, cast) -> None:
    built = make_study(Phase.VOTING)
    response = client_for(cast.alice).post(f"/studies/{built.study.pk}/experts/remind/", {"experts": []})
    assert form_errors(response, "remind_form") == {"experts": ["choose at least one expert"]}
    response = client_for(cast.alice).post(f"/studies/{built.study.pk}/experts/remind/", {"experts": ["charlie"]})
    assert "experts" in form_errors(response, "remind_form")
    assert mail.outbox == []


# --- /studies/{id}/inputs/{username}/ ---------------------------------------------------------------------


def test_an_experts_inputs_read_only(make_study, cast) -> None:
    built = make_study(Phase.CLOSED)
    client = client_for(cast.alice)
    carol = client.get(f"/studies/{built.study.pk}/inputs/carol/")
    page = body(carol)
    assert carol.context["priorities"]["method"] == "ahp"
    assert "Consistency ratio" in page and carol.context["priorities"]["consistent"] in (True, False)
    assert [row["name"] for row in carol.context["priorities"]["rows"]] == ["Accuracy", "Consistency", "Efficiency"]
    assert "Accuracy over Consistency: 3" in page
    assert re.search(r"AUC</th><td class=\"num\">0.75</td><td class=\"num\">0.9</td>", page)
    assert carol.context["peers"] == [("bob", "50"), ("carol", "50")]
    bob = client.get(f"/studies/{built.study.pk}/inputs/bob/")
    assert [(row["name"], row["given"]) for row in bob.context["priorities"]["rows"]] == [
        ("Accuracy", 50),
        ("Consistency", 30),
        ("Efficiency", 20),
    ]
    assert "Efficiency" in body(bob).split('id="votes-title"')[1].split("</section>")[0]
    assert client.get(f"/studies/{built.study.pk}/inputs/charlie/").status_code == 404
    assert client.get(f"/studies/{built.study.pk}/inputs/alice/").status_code == 404


# --- queries per page ---------------------------------------------------------------------------------------


def grow(built, cast, extra: int) -> None:
    """Add ``extra`` experts (draft only), candidates and metrics to the study,
    with every measurement."""
    study = built.study
    if study.phase == Phase.DRAFT:
        for index in range(extra):
            user = User.objects.create_user(username=f"extra{index}", email=f"extra{index}@example.org")
            services.expert_add(study=study, user=user)
            invitations.invitation_create(study=study, created_by=cast.alice, username=f"guest{index}")
            invitations.invitation_create(study=study, created_by=cast.alice)
        for index in range(extra):
            services.metric_add(
                study=study, attribute=built.attributes["Accuracy"], name=f"Extra metric {index}", default_range=[0, 1]
            )
    for index in range(extra):
        services.candidate_add(study=study, name=f"Extra candidate {index}")
    services.measurements_set(
        study=study,
        measurements=[
            {"candidate": c.name, "metric": m.name, "value": 0.5}
            for c in study.candidates.all()
            for m in Metric.objects.filter(study=study)
        ],
    )


def assert_queries(django_assert_num_queries, client: Client, path: str, count: int) -> None:
    with django_assert_num_queries(count):
        assert client.get(path).status_code in (200, 410), path


# Every page: the session and the user (2), the header's unread notifications (1,
# notifications.context_processors), the study and my roles in it (2),
# then its own reads, named below.
PAGE_QUERIES = [
    # attributes, metrics with their attributes, candidates; for the designer, why
    # a candidate can't be removed (workspace.extensions.CANDIDATE_KEEPERS: one query)
    ("designer", Phase.DRAFT, "setup/", 9),
    ("expert", Phase.DRAFT, "setup/", 8),
    # candidates, metrics, measured values, where computed values came from, where imported ones did (MLflow)
    ("designer", Phase.DRAFT, "measurements/", 10),
    ("expert", Phase.CLOSED, "measurements/", 11),  # 9, and the elicited metrics' spreads once closed (issue 21)
    # members with their users, invitations with their people
    ("designer", Phase.DRAFT, "experts/", 7),
    # ... and what each expert still has to give: experts with their
    # progress, the metrics needing a range, the ranges, the selected elicited metrics (issue 21),
    # the ranges to confirm (issue 31)
    ("designer", Phase.ASSESSMENT, "experts/", 13),  # and the notes on inputs (issue 16: selectors.input_note_list)
    # the expert; votes (2); priorities: prioritisations, weights, judgments,
    # local ones with their weights and judgments (6); ranges; peer weights
    ("designer", Phase.CLOSED, "inputs/bob/", 14),
    # the item, and for a metric the attributes to choose from
    ("designer", Phase.DRAFT, "setup/metrics/{metric}/", 7),
    ("designer", Phase.DRAFT, "setup/candidates/{candidate}/", 6),
    # the item, its measured values, and for an attribute its metrics
    ("designer", Phase.DRAFT, "setup/attributes/{attribute}/remove/", 8),
    ("designer", Phase.DRAFT, "experts/bob/remove/", 6),
]


@pytest.mark.parametrize(("role", "phase", "path", "count"), PAGE_QUERIES)
def test_queries_per_page_do_not_grow(make_study, cast, django_assert_num_queries, role, phase, path, count) -> None:
    built = make_study(phase, inputs=phase == Phase.ASSESSMENT)
    user = cast.alice if role == "designer" else cast.bob
    client = client_for(user)
    path = f"/studies/{built.study.pk}/" + path.format(
        metric=built.metrics["AUC"].pk, candidate=built.candidates["J48"].pk, attribute=built.attributes["Accuracy"].pk
    )
    assert_queries(django_assert_num_queries, client, path, count)
    grow(built, cast, 4)
    assert_queries(django_assert_num_queries, client, path, count)


def test_queries_of_the_new_study_and_invitation_pages(cast, make_study, django_assert_num_queries) -> None:
    built = make_study(Phase.DRAFT)
    client = client_for(cast.alice)
    # the session, the user, the header's unread notifications, the studies she designs (the templates)
    with django_assert_num_queries(4):
        client.get("/studies/new/")
    path = new_link(client, built.study)
    with django_assert_num_queries(1):  # the invitation with its study and designer
        assert Client().get(path).status_code == 200
    charlie = client_for(cast.charlie)
    # the session, the user, the header's unread notifications, the invitation, whether the user is an expert already
    with django_assert_num_queries(5):
        assert charlie.get(path).status_code == 200


# --- numbers on pages ----------------------------------------------------------------------------


def test_measured_values_are_shown_rounded_and_exported_in_full(make_study, cast) -> None:
    # issue 16, finding 9: 0.9019607843137255 was shown in full, widening the
    # card on a phone; the page rounds to DISPLAY_SIGNIFICANT_DIGITS, the bundle keeps every digit.
    from workspace.bundles import study_export_bundle

    built = make_study(Phase.DRAFT)
    study = built.study
    candidate = study.candidates.order_by("pk").first()
    metric = Metric.objects.filter(study=study).order_by("pk").first()
    services.measurements_set(
        study=study, measurements=[{"candidate": candidate.name, "metric": metric.name, "value": 0.9019607843137255}]
    )
    page = body(client_for(cast.bob).get(f"/studies/{study.pk}/measurements/"))
    assert re.search(r"<td[^>]*>\s*0\.902\s*</td>", page)
    assert "0.9019607843137255" not in page
    bundle = json.dumps(study_export_bundle(study=study))
    assert "0.9019607843137255" in bundle
