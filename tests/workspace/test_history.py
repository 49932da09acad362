"""Every change's history (issue 22): each kind of change through the
services leaves exactly one record per row it changes, with the actor, the
source and the values; a refused change leaves none; an expert sees only
their own inputs and the study's public events; the tab's and the API's
queries do not grow with the records; a deleted study is recorded."""

import html
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from engine import services as engine_services
from workspace import history, invitations, services
from workspace.errors import InvalidInput
from workspace.models import Phase, Study, StudyDeletion
from workspace.selectors import history as records

from ..fixtures import PASSWORD


def counts(study_id: int) -> Counter:
    """(kind, type) -> how many records the study has."""
    found: Counter = Counter()
    for kind, model in history.KINDS.items():
        for history_type in model.history.filter(history_study_id=study_id).values_list("history_type", flat=True):
            found[(kind, history_type)] += 1
    return found


def latest(kind: str, study_id: int):
    return history.KINDS[kind].history.filter(history_study_id=study_id).order_by("-history_id").first()


# Each case: the phase the study is built in, the change (built, cast), and the
# records it must leave, exactly (kind, type): count.
CASES = {
    "study renamed": (
        "draft",
        lambda b, c: services.study_update(study=b.study, title="Renamed"),
        {("study", "~"): 1},
    ),
    "attribute added": (
        "draft",
        lambda b, c: services.attribute_add(study=b.study, name="Fairness"),
        {("attribute", "+"): 1},
    ),
    "attribute deleted, with its metrics and measurements": (
        "draft",
        lambda b, c: services.attribute_remove(attribute=b.attributes["Accuracy"]),
        {("attribute", "-"): 1, ("metric", "-"): 2, ("measurement", "-"): 4},
    ),
    "candidate added": (
        "draft",
        lambda b, c: services.candidate_add(study=b.study, name="SVM"),
        {("candidate", "+"): 1},
    ),
    "one measurement changed, one re-typed the same": (
        "draft",
        lambda b, c: services.measurements_set(
            study=b.study,
            measurements=[
                {"candidate": "J48", "metric": "AUC", "value": 0.91},
                {"candidate": "JRip", "metric": "AUC", "value": 0.9},
            ],
        ),
        {("measurement", "~"): 1},
    ),
    "expert added": (
        "draft",
        lambda b, c: services.expert_add(study=b.study, user=c.charlie),
        {("membership", "+"): 1},
    ),
    "expert removed": (
        "draft",
        lambda b, c: services.expert_remove(study=b.study, user=c.carol),
        {("membership", "-"): 1},
    ),
    "invitation sent": (
        "draft",
        lambda b, c: invitations.invitation_create(study=b.study, created_by=c.alice, username="charlie"),
        {("invitation", "+"): 1},
    ),
    "voting opened": (
        "draft",
        lambda b, c: services.study_open_voting(study=b.study),
        {("study", "~"): 1},
    ),
    "a vote added, one kept": (
        "voting",
        lambda b, c: services.votes_set(expert=b.bob, attributes=["Efficiency", "Flexibility"], metrics=[]),
        {("attribute_vote", "+"): 1},
    ),
    "a vote withdrawn": (
        "voting",
        lambda b, c: services.votes_set(expert=b.bob, attributes=[], metrics=[]),
        {("attribute_vote", "-"): 1},
    ),
    "weights given": (
        "assessment",
        lambda b, c: services.prioritisation_set(
            expert=b.bob, method="direct", weights={"Accuracy": 50, "Consistency": 30, "Efficiency": 20}
        ),
        {("attribute_prioritisation", "+"): 1, ("attribute_weight", "+"): 3},
    ),
    "judgments given": (
        "assessment",
        lambda b, c: services.prioritisation_set(
            expert=b.carol,
            method="ahp",
            judgments=[["Accuracy", "Consistency", 3], ["Accuracy", "Efficiency", 5], ["Consistency", "Efficiency", 2]],
        ),
        {("attribute_prioritisation", "+"): 1, ("attribute_judgment", "+"): 3, ("attribute_weight", "+"): 3},
    ),
    "a range given": (
        "assessment",
        lambda b, c: services.ranges_set(expert=b.bob, ranges={"AUC": [0.7, 0.95]}),
        # the range, and the membership's ranges confirmed
        {("range", "+"): 1, ("membership", "~"): 1},
    ),
    "peer weights given": (
        "assessment",
        lambda b, c: services.peer_weights_set(expert=b.bob, weights={"bob": 0.6, "carol": 0.4}),
        {("peer_weight", "+"): 2},
    ),
    "a run launched": (
        "closed",
        lambda b, c: engine_services.run_launch(study=b.study, launched_by=c.alice),
        {("run", "+"): 1},
    ),
}


@pytest.mark.parametrize("copied", [False, True], ids=["built", "copied"])
@pytest.mark.parametrize("case", list(CASES))
def test_every_kind_of_change_leaves_exactly_one_record_per_row_with_its_actor(
    make_study, cast, case, copied, monkeypatch
):
    """``copied``: every bulk record copied from the table on PostgreSQL
    (history._record_copied, used from COPY_FROM_ROWS rows on), not built."""
    if copied:
        monkeypatch.setattr(history, "COPY_FROM_ROWS", 1)
    phase, change, expected = CASES[case]
    built = make_study(phase)
    before = counts(built.study.pk)
    with history.source("page", user=cast.alice):
        change(built, cast)
    after = counts(built.study.pk)
    assert dict(after - before) == expected
    for kind, history_type in expected:
        record = latest(kind, built.study.pk)
        assert (record.history_type, record.history_user_id, record.history_source) == (
            history_type,
            cast.alice.pk,
            "page",
        )


def test_a_record_holds_the_old_and_the_new_values(make_study, cast):
    built = make_study("draft")
    services.measurements_set(study=built.study, measurements=[{"candidate": "J48", "metric": "AUC", "value": 0.91}])
    [entry] = records.history_list(
        study=built.study, user=cast.alice, filters=records.HistoryFilter(kind="measurement"), limit=1
    )
    assert (entry.action, entry.kind) == ("changed", "measurement")
    assert [(c.field, c.old, c.new) for c in entry.changes] == [("value", "0.88", "0.91")]


def test_the_selection_at_close_of_voting_records_each_row_changed(make_study):
    built = make_study("voting")
    before = counts(built.study.pk)
    services.study_close_voting(study=built.study)
    added = counts(built.study.pk) - before
    # Three attributes and four metrics enter the selection; Flexibility and its
    # metric stay out, unchanged, and leave no record.
    assert dict(added) == {("study", "~"): 1, ("attribute", "~"): 3, ("metric", "~"): 4}
    changed = history.KINDS["attribute"].history.filter(history_study_id=built.study.pk, history_type="~")
    assert sorted(changed.values_list("name", "is_selected")) == [
        ("Accuracy", True),
        ("Consistency", True),
        ("Efficiency", True),
    ]


REFUSED = {
    "an unknown attribute voted for": (
        "voting",
        lambda b: services.votes_set(expert=b.bob, attributes=["Nonsense"], metrics=[]),
    ),
    "weights that do not sum": (
        "assessment",
        lambda b: services.prioritisation_set(expert=b.bob, method="direct", weights={"Accuracy": -1}),
    ),
    "a duplicate attribute": ("draft", lambda b: services.attribute_add(study=b.study, name="Accuracy")),
    "a measurement of no candidate": (
        "draft",
        lambda b: services.measurements_set(
            study=b.study,
            measurements=[
                {"candidate": "J48", "metric": "AUC", "value": 0.5},
                {"candidate": "Nope", "metric": "AUC", "value": 0.5},
            ],
        ),
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_refused_change_leaves_no_record(make_study, case):
    phase, change = REFUSED[case]
    built = make_study(phase)
    before = counts(built.study.pk)
    with pytest.raises(InvalidInput):
        change(built)
    assert counts(built.study.pk) == before


def test_a_change_rolled_back_takes_its_record_with_it(make_study):
    from django.db import transaction

    built = make_study("draft")
    before = counts(built.study.pk)
    with pytest.raises(RuntimeError), transaction.atomic():
        services.attribute_add(study=built.study, name="Fairness")
        raise RuntimeError("later step failed")
    assert counts(built.study.pk) == before


def _api(client, user):
    client.login(username=user.get_username(), password=PASSWORD)
    return client


def test_an_expert_sees_their_own_inputs_and_the_public_events_only(make_study, cast, client):
    built = make_study("closed")
    study = built.study
    everything = list(records.history_all(study=study, user=cast.alice, filters=records.HistoryFilter()))
    assert {e.expert for e in everything} >= {"bob", "carol", None}
    assert any(e.kind == "peer_weight" and e.expert == "carol" for e in everything)
    mine = list(records.history_all(study=study, user=cast.bob, filters=records.HistoryFilter()))
    assert {e.expert for e in mine} == {"bob", None}
    assert {e.kind for e in mine if e.expert is None} <= records.PUBLIC_KINDS
    assert {e.kind for e in mine if e.expert == "bob"} >= {"attribute_vote", "peer_weight", "range"}
    # The API answers the same, and so does the page.
    answer = _api(client, cast.bob).get(f"/api/v1/studies/{study.pk}/history/", {"page_size": 200}).json()
    assert answer["count"] == len(mine)
    assert {row["expert"] for row in answer["results"]} == {"bob", None}
    page = html.unescape(client.get(f"/studies/{study.pk}/history/").content.decode())
    assert "set carol's range" not in page and "set bob's range for AUC" in page
    client.logout()
    answer = _api(client, cast.alice).get(f"/api/v1/studies/{study.pk}/history/", {"page_size": 1}).json()
    assert answer["count"] == len(everything)
    client.logout()
    # A stranger learns nothing, not even that the study exists.
    assert _api(client, cast.charlie).get(f"/api/v1/studies/{study.pk}/history/").status_code == 404


def test_filters_by_person_kind_and_date(make_study, cast):
    built = make_study("assessment")
    with history.source("api", user=cast.bob):
        services.ranges_set(expert=built.bob, ranges={"AUC": [0.7, 0.95]})
    by_bob = list(records.history_all(study=built.study, user=cast.alice, filters=records.HistoryFilter(person="bob")))
    assert {(e.kind, e.user, e.source) for e in by_bob} == {("range", "bob", "api"), ("membership", "bob", "api")}
    ranges = records.history_filter_parse({"kind": "range", "since": timezone.now().date().isoformat()})
    assert [e.kind for e in records.history_all(study=built.study, user=cast.alice, filters=ranges)] == ["range"]
    tomorrow = records.history_filter_parse({"since": (timezone.now() + timedelta(days=1)).date().isoformat()})
    assert records.history_count(study=built.study, user=cast.alice, filters=tomorrow) == 0


def test_a_filter_not_understood_is_refused_naming_it(make_study, cast, client):
    with pytest.raises(InvalidInput) as info:
        records.history_filter_parse({"kind": "spells", "since": "yesterday", "until": ""})
    assert set(info.value.errors) == {"kind", "since"}
    with pytest.raises(InvalidInput) as info:
        records.history_filter_parse({"since": "2026-02-02", "until": "2026-02-01"})
    assert set(info.value.errors) == {"until"}
    built = make_study("draft")
    response = _api(client, cast.alice).get(f"/api/v1/studies/{built.study.pk}/history/", {"kind": "spells"})
    assert response.status_code == 400
    assert list(response.json()["fields"]) == ["kind"]
    assert client.get(f"/studies/{built.study.pk}/history/", {"since": "nope"}).status_code == 400


def test_the_requests_source_and_user_are_recorded(make_study, cast, client):
    built = make_study("draft")
    _api(client, cast.alice).patch(
        f"/api/v1/studies/{built.study.pk}/", {"title": "Via the API"}, content_type="application/json"
    )
    record = latest("study", built.study.pk)
    assert (record.title, record.history_source, record.history_user_id) == ("Via the API", "api", cast.alice.pk)


def _query_count(client, url):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return len(queries)


def test_the_tab_and_the_api_queries_do_not_grow_with_the_records(make_study, cast, client):
    """Per page: the count, the page's keys, two per kind on the page and the
    experts' names; pages of the same kinds cost the same however many records
    there are (two kinds here: 3 + 2 x 2 reads of the history)."""
    built = make_study("closed")
    _api(client, cast.alice)
    page, api = f"/studies/{built.study.pk}/history/", f"/api/v1/studies/{built.study.pk}/history/?page_size=200"

    def more(n):
        for value in range(n):
            services.study_update(study=built.study, title=f"Title {value}")
            services.measurements_set(
                study=built.study, measurements=[{"candidate": "J48", "metric": "AUC", "value": value / 1000}]
            )

    more(105)  # the newest 210 records: studies and measurements
    few = (_query_count(client, page), _query_count(client, api))
    more(200)
    many = (_query_count(client, page), _query_count(client, api))
    assert many == few
    assert records.history_count(study=built.study, user=cast.alice, filters=records.HistoryFilter()) > 610


def test_the_exports_hold_every_filtered_record(make_study, cast, client):
    built = make_study("assessment", inputs=True)
    _api(client, cast.alice)
    expected = records.history_count(study=built.study, user=cast.alice, filters=records.HistoryFilter(kind="range"))
    assert expected == 3
    csv_text = client.get(f"/studies/{built.study.pk}/history/", {"kind": "range", "format": "csv"}).content.decode()
    lines = csv_text.strip().split("\n")
    assert lines[0] == "at,user,source,kind,object_id,object_name,action,expert,changes,sentence"
    assert len(lines) == 1 + expected
    assert all(",range," in line for line in lines[1:])
    document = client.get(f"/studies/{built.study.pk}/history/", {"kind": "range", "format": "json"}).json()
    assert len(document["history"]) == expected
    assert {row["expert"] for row in document["history"]} == {"bob", "carol"}


def test_nothing_can_be_changed_through_the_site(make_study, cast, client):
    built = make_study("draft")
    _api(client, cast.alice)
    url = f"/api/v1/studies/{built.study.pk}/history/"
    for method in (client.post, client.put, client.patch, client.delete):
        assert method(url, {}, content_type="application/json").status_code == 405
    assert client.post(f"/studies/{built.study.pk}/history/").status_code == 405


def test_deleting_a_study_is_recorded_with_its_bundle_and_purged_after_retention(make_study, cast, settings):
    built = make_study("assessment", inputs=True)
    study_id = built.study.pk
    with history.source("page", user=cast.alice):
        services.study_delete(study=built.study)
    assert not Study.objects.filter(pk=study_id).exists()
    deletion = StudyDeletion.objects.get(study_id=study_id)
    assert (deletion.deleted_by, deletion.source, deletion.title) == (cast.alice, "page", "Choosing a classifier")
    assert deletion.bundle["title"] == "Choosing a classifier"
    assert len(deletion.bundle["experts"]) == 2
    # The study's own deletion is a record; the rows deleted with it are not one each.
    after = counts(study_id)
    assert after[("study", "-")] == 1
    assert not [key for key in after if key[1] == "-" and key[0] != "study"]
    kept = sum(after.values())
    assert services.study_deletions_purge() == 0
    assert sum(counts(study_id).values()) == kept
    later = timezone.now() + timedelta(days=settings.APPROVE_DELETED_STUDY_RETENTION_DAYS + 1)
    assert services.study_deletions_purge(now=later) == 1
    assert not StudyDeletion.objects.filter(study_id=study_id).exists()
    assert sum(counts(study_id).values()) == 0


def test_an_import_is_recorded_as_one(case_study, cast):
    from workspace.bundles import study_import_bundle

    with history.source("import", user=cast.alice):
        study = study_import_bundle(bundle=case_study)
    found = counts(study.pk)
    assert found[("measurement", "+")] == study.measurements.count()
    assert {key[1] for key in found} == {"+", "~"}
    sources = set()
    for model in history.KINDS.values():
        sources |= set(model.history.filter(history_study_id=study.pk).values_list("history_source", flat=True))
    assert sources == {"import"}


def test_phase_is_the_studys_public_event(make_study, cast):
    built = make_study("draft")
    services.study_open_voting(study=built.study)
    [entry] = records.history_list(
        study=built.study, user=cast.bob, filters=records.HistoryFilter(kind="study"), limit=1
    )
    assert [(c.field, c.old, c.new) for c in entry.changes] == [("phase", Phase.DRAFT, Phase.VOTING)]


def test_the_csv_defuses_formulas(make_study, cast, client):
    built = make_study("draft")
    services.candidate_add(study=built.study, name="=HYPERLINK()")
    _api(client, cast.alice)
    text = client.get(f"/studies/{built.study.pk}/history/", {"kind": "candidate", "format": "csv"}).content.decode()
    assert "'=HYPERLINK()" in text
    assert ",=HYPERLINK()" not in text


def test_an_id_is_shown_with_the_name_of_the_row_it_names(make_study, cast, client):
    """A foreign key's value (``candidate_id: 4``) comes with the name of the
    row (the candidate J48) on the page, in the API and in the CSV; once that
    row is gone, the id alone."""
    built = make_study("closed")
    _api(client, cast.alice)
    j48 = built.study.candidates.get(name="J48")
    auc = built.study.metrics.get(name="AUC")
    url = f"/api/v1/studies/{built.study.pk}/history/"

    def j48_auc_created():
        rows = client.get(url, {"kind": "measurement", "page_size": 200}).json()["results"]
        for row in rows:
            changes = {c["field"]: c for c in row["changes"]}
            mine = changes["candidate_id"]["new"] == str(j48.pk) and changes["metric_id"]["new"] == str(auc.pk)
            if row["action"] == "created" and mine:
                return changes
        raise AssertionError("no record of J48's AUC being created")

    changes = j48_auc_created()
    assert changes["candidate_id"] == {
        "field": "candidate_id",
        "old": None,
        "new": str(j48.pk),
        "old_name": None,
        "new_name": "J48",
    }
    assert changes["metric_id"]["new_name"] == "AUC"
    assert changes["value"]["new_name"] is None  # not a foreign key
    page = client.get(f"/studies/{built.study.pk}/history/", {"kind": "measurement"}).content.decode()
    # The page names the row alone (issue 31: no record numbers on a page).
    assert "<ins>J48</ins>" in page and f"(#{j48.pk})" not in page
    csv_text = client.get(f"/studies/{built.study.pk}/history/", {"kind": "measurement", "format": "csv"}).content
    assert f"candidate_id:  → J48 (#{j48.pk})" in csv_text.decode()
    services.candidate_remove(candidate=j48)
    deleted = client.get(url, {"kind": "candidate"}).json()["results"][0]
    assert deleted["action"] == "deleted" and deleted["object_name"] == "J48"
    changes = j48_auc_created()
    assert changes["candidate_id"]["new"] == str(j48.pk) and changes["candidate_id"]["new_name"] is None
    assert changes["metric_id"]["new_name"] == "AUC"
