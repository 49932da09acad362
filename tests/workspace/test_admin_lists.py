"""The admin's lists at a site's size (workspace.admin_lists; issue 33,
item 8; bench/site.py): what they read of the whole table to frame a page.

On the site bench/site.py builds (10,000 studies, 50,000 users, 1,000,000
history records) each of these was a sequential scan per request: the
history's source filter and every ``date_hierarchy`` a ``SELECT DISTINCT``
of the table, the study list's count a join of every membership, and every
unfiltered count a ``COUNT(*)`` of the table."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from engine.models import Run
from workspace import admin_lists, services
from workspace.admin_lists import HistorySourceFilter
from workspace.history import SOURCES
from workspace.models import Membership, Phase, Study


def _changelist(model):
    meta = model._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist")


def _open(client, url):
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, url
    return response, [query["sql"] for query in queries.captured_queries]


BIG = {
    "study": lambda: Study,
    "membership": lambda: Membership,
    "run": lambda: Run,
    "user": get_user_model,
    "study history": lambda: Study.history.model,
    "membership history": lambda: Membership.history.model,
    "run history": lambda: Run.history.model,
}


def _more_of_the_site(cast, count):
    """``count`` more studies of someone else's, each with an expert and a run."""
    for n in range(count):
        study = services.study_create(designer=cast.carol, title=f"Someone else's study {n}")
        Membership.objects.create(study=study, user=cast.charlie, role=Membership.Role.EXPERT)
        Run.objects.create(study=study, launched_by=cast.carol)


@pytest.mark.parametrize("kind", list(BIG))
def test_a_big_tables_list_reads_no_distinct_values_and_its_queries_do_not_grow(kind, admin_client, make_study, cast):
    model = BIG[kind]()
    built = make_study(Phase.CLOSED)
    Run.objects.create(study=built.study, launched_by=cast.alice)
    table = model._meta.db_table
    _, few = _open(admin_client, _changelist(model))
    # The date_hierarchy's years and the source filter's values read every row of the table.
    assert not [sql for sql in few if "DISTINCT" in sql and f'FROM "{table}"' in sql]
    assert not [sql for sql in few if "MIN(" in sql and table in sql]
    _more_of_the_site(cast, 4)
    _, more = _open(admin_client, _changelist(model))
    assert len(more) == len(few)


def test_the_study_list_counts_studies_without_joining_their_memberships(admin_client, make_study, cast):
    built = make_study(Phase.DRAFT, experts=("bob", "carol", "charlie"))
    _more_of_the_site(cast, 2)
    response, queries = _open(admin_client, _changelist(Study))
    counts = [sql for sql in queries if sql.startswith("SELECT COUNT(*)") and '"workspace_study"' in sql]
    assert counts and all("workspace_membership" not in sql for sql in counts)
    shown = {study.pk: study._expert_count for study in response.context["cl"].result_list}
    # Each study's experts, counted by its own subquery: 3 in the built one, 1 in each of the others.
    assert shown[built.study.pk] == 3
    assert sorted(shown.values()) == [1, 1, 3]


def test_the_history_is_filtered_by_source_from_the_sources_there_can_be(admin_client, make_study):
    make_study(Phase.VOTING)
    model = Study.history.model
    recorded = set(model.objects.values_list("history_source", flat=True))
    assert recorded  # the study's records, from the sources the services ran under
    source = sorted(recorded)[0]
    response, _ = _open(admin_client, f"{_changelist(model)}?history_source={source}")
    listed = response.context["cl"].result_list
    assert listed and {record.history_source for record in listed} == {source}
    assert len(listed) == model.objects.filter(history_source=source).count()
    offered = next(spec for spec in response.context["cl"].filter_specs if isinstance(spec, HistorySourceFilter))
    assert [value for value, _label in offered.lookup_choices] == list(SOURCES)


def test_an_unfiltered_list_of_a_big_table_takes_postgresqls_estimate(admin_client, make_study, monkeypatch):
    make_study(Phase.CLOSED)
    model = Membership.history.model
    table, rows = model._meta.db_table, model.objects.count()
    monkeypatch.setattr(admin_lists, "ESTIMATED_COUNT_ABOVE", rows - 1)  # this table is "big"
    on_postgresql = connection.vendor == "postgresql"
    if on_postgresql:
        with connection.cursor() as cursor:
            cursor.execute(f'ANALYZE "{table}"')  # its statistics: every row, at this size
    response, queries = _open(admin_client, _changelist(model))
    counted = [sql for sql in queries if sql.startswith("SELECT COUNT(*)") and f'"{table}"' in sql]
    estimate = admin_lists.estimated_count(model.objects.all())
    if on_postgresql:
        assert estimate == rows and not counted
    else:  # no statistics to read: counted row by row
        assert estimate is None and len(counted) == 1
    assert response.context["cl"].result_count == rows
    # Filtered, it is counted exactly, once (no second, unfiltered count).
    response, queries = _open(admin_client, f"{_changelist(model)}?history_type=%2B")
    counted = [sql for sql in queries if sql.startswith("SELECT COUNT(*)") and f'"{table}"' in sql]
    assert len(counted) == 1
    assert response.context["cl"].result_count == model.objects.filter(history_type="+").count()
    assert admin_lists.estimated_count(model.objects.filter(history_type="+")) is None


def test_the_membership_list_is_sorted_by_its_own_columns_not_by_every_study(admin_client, make_study, cast):
    built = make_study(Phase.DRAFT)
    _more_of_the_site(cast, 2)
    response, queries = _open(admin_client, _changelist(Membership))
    listed = [sql for sql in queries if sql.startswith('SELECT "workspace_membership"."id"') and "ORDER BY" in sql]
    assert listed
    # Meta's ordering ("study") would sort every membership by its study's creation time.
    assert all('"workspace_study"."created_at"' not in sql.split("ORDER BY")[-1] for sql in listed)
    shown = [(m.study_id, m.role) for m in response.context["cl"].result_list]
    assert shown == sorted(shown, key=lambda row: (-row[0], row[1]))
    assert shown[-1][0] == built.study.pk  # the oldest study's memberships last
