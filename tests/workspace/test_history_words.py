"""The History in sentences (issue 31, finding 11): each record says who
did what, naming people as the pages do and the values in words, never a
record number, a column's name or an internal timestamp; an input saved as
a whole leaves one record per value it changes; the filter names kinds in
words. The API keeps its machine values and adds the sentence."""

import datetime as dt
import re
from dataclasses import replace
from types import SimpleNamespace

import pytest
from django.utils import timezone

from tests.pages.test_studyhome import as_user, text_of
from workspace import history, services
from workspace.models import Phase
from workspace.selectors import history as records
from workspace.selectors import history_words

# What a reader must never meet in a sentence: a record number, a column's
# name (snake_case), an ISO timestamp, Python's None.
RAW = re.compile(r"#\d|\b[a-z]+_[a-z_]+\b|\d{4}-\d\d-\d\dT\d\d:|\bNone\b")


@pytest.fixture
def named(cast):
    """alice and bob with full names, as a page shows them."""
    for user, first, last in ((cast.alice, "Dana", "Designer"), (cast.bob, "Clara", "Clinician")):
        user.first_name, user.last_name = first, last
        user.save()
    return cast


def sentences(study, user, kind=None):
    """The study's records in words, oldest first."""
    entries = records.history_list(study=study, user=user, filters=records.HistoryFilter(kind=kind), limit=500)
    return [entry.sentence for entry in reversed(entries)]


FIVE = {"Success rate": [0.8, 0.95], "AUC": [0.7, 0.95], "Fold stdev": [0.15, 0.05], "Training time": [60, 1]}
FIVE["Flexibility score"] = [5, 9]
# Votes selecting every attribute, so five metrics are selected.
ALL_VOTES = {
    "bob": {"attributes": ["Efficiency", "Flexibility"], "metrics": []},
    "carol": {"attributes": [], "metrics": []},
}


def test_a_changed_range_is_one_sentence_naming_the_expert_and_both_ranges(make_study, named):
    built = make_study(Phase.ASSESSMENT, votes=ALL_VOTES)
    with history.source("page", user=named.bob):
        services.ranges_set(expert=built.bob, ranges=FIVE)
        services.ranges_set(expert=built.bob, ranges={**FIVE, "AUC": [0.75, 0.95]})
    said = sentences(built.study, named.alice)
    assert said[-2:] == [
        "Clara Clinician confirmed their ranges.",
        "Clara Clinician changed their range for AUC from 0.7–0.95 to 0.75–0.95.",
    ]
    assert not any(RAW.search(sentence) for sentence in said), [s for s in said if RAW.search(s)]


def test_saving_five_ranges_again_records_the_one_changed_not_ten(make_study, named):
    """The service updates in place (``history.replace``): five ranges saved
    anew with one value changed leave one record, a change, not five
    deletions and five creations."""
    built = make_study(Phase.ASSESSMENT, votes=ALL_VOTES)
    ranges = history.KINDS["range"].history.filter(history_study_id=built.study.pk)
    services.ranges_set(expert=built.bob, ranges=FIVE)
    assert sorted(ranges.values_list("history_type", flat=True)) == ["+"] * 5
    first = set(built.bob.ranges.values_list("pk", flat=True))
    services.ranges_set(expert=built.bob, ranges={**FIVE, "Training time": [50, 1]})
    assert sorted(ranges.values_list("history_type", flat=True)) == ["+"] * 5 + ["~"]
    assert set(built.bob.ranges.values_list("pk", flat=True)) == first
    services.ranges_set(expert=built.bob, ranges={name: FIVE[name] for name in ("AUC", "Success rate")})
    # The three left out go back to their defaults: three deletions, nothing else.
    assert sorted(ranges.values_list("history_type", flat=True)) == ["+"] * 5 + ["-"] * 3 + ["~"]
    assert {r.metric.name: [r.least_acceptable, r.desired] for r in built.bob.ranges.all()} == {
        "AUC": [0.7, 0.95],
        "Success rate": [0.8, 0.95],
    }


def test_peer_weights_saved_again_record_only_those_changed(make_study, named):
    built = make_study(Phase.ASSESSMENT)
    weights = history.KINDS["peer_weight"].history.filter(history_study_id=built.study.pk)
    with history.source("page", user=named.bob):
        services.peer_weights_set(expert=built.bob, weights={"bob": 0.6, "carol": 0.4})
        services.peer_weights_set(expert=built.bob, weights={"bob": 0.5, "carol": 0.5})
    assert sorted(weights.values_list("history_type", flat=True)) == ["+", "+", "~", "~"]
    assert sentences(built.study, named.alice, kind="peer_weight")[-2:] == [
        "Clara Clinician changed their peer weight for themselves from 0.6 to 0.5.",
        "Clara Clinician changed their peer weight for carol from 0.4 to 0.5.",
    ]


def test_excluding_and_readmitting_an_expert_are_said_with_the_reason(make_study, named):
    built = make_study(Phase.ASSESSMENT)
    with history.source("page", user=named.alice):
        services.expert_absence_set(
            study=built.study, expert=built.bob, absence="excluded", reason="on leave", acting=named.alice, tell=False
        )
        services.expert_readmit(study=built.study, expert=built.bob, acting=named.alice)
    assert sentences(built.study, named.alice, kind="membership")[-2:] == [
        "Dana Designer excluded Clara Clinician from the panel: on leave.",
        "Dana Designer readmitted Clara Clinician to the panel.",
    ]


def test_a_renamed_metric_is_said_with_both_names(make_study, named):
    built = make_study(Phase.DRAFT)
    with history.source("page", user=named.alice):
        services.metric_update(metric=built.metrics["AUC"], name="ROC AUC")
    assert (
        sentences(built.study, named.alice, kind="metric")[-1] == "Dana Designer renamed the metric “AUC” to “ROC AUC”."
    )


def test_a_whole_study_reads_in_sentences_without_raw_names(make_study, named):
    with history.source("page", user=named.alice):
        built = make_study(Phase.CLOSED)
    said = sentences(built.study, named.alice)
    assert len(said) > 40
    assert not [sentence for sentence in said if RAW.search(sentence)]
    assert "Dana Designer closed voting and opened the assessment." in said
    assert "Dana Designer added Clara Clinician to the panel." in said


def _value(column, which):
    """A plausible value of a column, two of them (which = 0 or 1)."""
    kind = column.get_internal_type()
    if column.choices:
        return [value for value, _ in column.flatchoices][which % len(column.flatchoices)]
    if column.is_relation:
        return 1 + which
    by_kind = {
        "FloatField": (0.7, 0.75),
        "BooleanField": (False, True),
        "DateTimeField": (timezone.now() - dt.timedelta(days=1), timezone.now()),
        "JSONField": ({}, {"a": 1}),
        "BinaryField": (b"", b"x"),
    }
    if kind in by_kind:
        return by_kind[kind][which]
    if "Integer" in kind:
        return 2 + which
    return ("Old text", "New text")[which]


def _fake(model, which):
    tracked = model.history.model.tracked_fields
    values = {column.attname: _value(column, which) for column in tracked}
    return SimpleNamespace(instance_type=model, history_expert_id=7, **values)


@pytest.mark.parametrize("kind", history.KIND_NAMES)
def test_every_kind_says_its_creation_change_and_deletion_in_words(kind, db):
    """Every recorded kind has its sentences, whatever its columns hold,
    none naming a column or an id: each action, and a change of every column."""
    model = history.KINDS[kind]
    assert kind in history_words.WORDINGS
    before, now = _fake(model, 0), _fake(model, 1)
    fields = tuple(column.attname for column in model.history.model.tracked_fields if column.attname != "id")
    people = {7: history_words.Person(user_id=1, name="Clara Clinician"), 1: history_words.Person(1, "Bob")}
    for action, previous in (("created", None), ("changed", before), ("deleted", None)):
        for changed in [fields, *((name,) for name in fields)] if action == "changed" else [fields]:
            facts = history_words.Facts(kind, action, now, previous, changed, {}, people, actor_id=1)
            said = history_words.sentence(facts, "Dana Designer")
            assert said.startswith("Dana Designer ") and said.endswith(".")
            assert not RAW.search(said), (action, changed, said)


def test_a_change_no_wording_knows_is_said_generically(make_study, named, monkeypatch):
    built = make_study(Phase.DRAFT)
    candidate = history_words.WORDINGS["candidate"]
    monkeypatch.setitem(history_words.WORDINGS, "candidate", replace(candidate, fields={}))
    with history.source("page", user=named.alice):
        services.candidate_update(candidate=built.candidates["J48"], description="a decision tree")
    assert sentences(built.study, named.alice, kind="candidate")[-1] == (
        "Dana Designer changed the description of the candidate J48 from “J48 learner” to “a decision tree”."
    )
    monkeypatch.delitem(history_words.WORDINGS, "candidate")
    assert sentences(built.study, named.alice, kind="candidate")[-1] == "Dana Designer changed a candidate."


def test_the_page_shows_sentences_and_the_filter_names_kinds_in_words(make_study, named, client):
    with history.source("page", user=named.bob):
        built = make_study(Phase.ASSESSMENT, inputs=True)
    response = as_user(client, named.alice).get(f"/studies/{built.study.pk}/history/")
    body = response.content.decode()
    assert '<option value="attribute_vote">Attribute votes</option>' in body
    assert '<option value="range">Acceptable ranges</option>' in body
    assert ">attribute_vote<" not in body
    assert "Clara Clinician (bob)" in body  # the person filter: name, then username
    page = text_of(response)
    assert "Clara Clinician set their range for AUC to 0.7–0.95." in page
    assert not re.search(r"#\d|ranges_confirmed_at|\d{4}-\d\d-\d\dT\d\d:", page)


def test_the_api_keeps_its_kinds_and_adds_the_sentence_and_label(make_study, named, client):
    with history.source("api", user=named.bob):
        built = make_study(Phase.ASSESSMENT, inputs=True)
    client.force_login(named.alice)
    answer = client.get(f"/api/v1/studies/{built.study.pk}/history/", {"kind": "attribute_vote"}).json()
    vote = answer["results"][0]
    assert vote["kind"] == "attribute_vote"
    assert vote["kind_label"] == "Attribute votes"
    assert vote["sentence"] == "Clara Clinician voted for the attribute Efficiency."
