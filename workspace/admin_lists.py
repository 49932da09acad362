"""The admin's lists at a site's size (issue 33, item 8; bench/site.py).

At 10,000 studies, 50,000 users and 1,000,000 history records, what costs
an admin list is not the page of rows it shows but what it reads of the
whole table to frame them:

- the paginator's ``COUNT(*)``, a sequential scan of the table: an
  unfiltered list of a table PostgreSQL counts at more than
  ``ESTIMATED_COUNT_ABOVE`` rows takes PostgreSQL's own estimate instead
  (``pg_class.reltuples``, kept by ANALYZE and autovacuum, "about" the
  number: the last page may be shorter than the count says, or empty). A
  filtered or searched list, and every smaller table, is counted exactly;
  ``show_full_result_count`` is off, so a filtered list is not counted a
  second time unfiltered;
- ``date_hierarchy``, whose links are a ``SELECT DISTINCT`` of the dates of
  every row: the big tables' admins filter by date with Django's date
  filter instead (today, the past 7 days, this month, this year: no query);
- the page itself: a row costs the admin about half a millisecond of
  CPU (its checkbox and links are templates), so a page of Django's 100 rows
  costs 3 to 6 times a page of a few; these lists show ``ROWS_PER_PAGE`` (25)
  a page, as the site's own lists do;
- a filter of every value a column holds (``AllValuesFieldListFilter``, a
  ``SELECT DISTINCT`` of the column): the history's source is filtered by
  the sources there can be (``workspace.history.SOURCES``) instead.
"""

from typing import Any, ClassVar

from django.contrib import admin
from django.core.paginator import Paginator
from django.db import connections
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.functional import cached_property

from .history import SOURCES
from .limits import ADMIN_ESTIMATED_COUNT_ABOVE

#: Above this estimate an unfiltered admin list is not counted row by row.
ESTIMATED_COUNT_ABOVE = ADMIN_ESTIMATED_COUNT_ABOVE
#: Rows a page of the big tables' admin lists (as the site's own lists, workspace.limits.CANDIDATES_PER_PAGE).
ROWS_PER_PAGE = 25


def estimated_count(queryset: Any) -> int | None:
    """PostgreSQL's estimate of the rows of ``queryset``'s table when
    ``queryset`` is the whole table (no filter), else None (also on another
    database, or a table never analysed)."""
    if not isinstance(queryset, QuerySet) or queryset.query.where or queryset.query.combinator:
        return None
    connection = connections[queryset.db]
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = %s::regclass", [queryset.model._meta.db_table])
        row = cursor.fetchone()
    return int(row[0]) if row is not None and row[0] >= 0 else None


class EstimatedCountPaginator(Paginator):
    """A paginator whose count of a whole big table is PostgreSQL's estimate
    (``estimated_count``), exact below ``ESTIMATED_COUNT_ABOVE`` or when filtered."""

    @cached_property
    def count(self) -> int:
        estimate = estimated_count(self.object_list)
        if estimate is not None and estimate > ESTIMATED_COUNT_ABOVE:
            return estimate
        return super().count


class SiteSizeAdmin:
    """Mixed into the admins of the tables that grow with the site (before
    ``admin.ModelAdmin``): the estimated count, no second count, 25 rows a page."""

    paginator: ClassVar[type] = EstimatedCountPaginator
    show_full_result_count: ClassVar[bool] = False
    list_per_page: ClassVar[int] = ROWS_PER_PAGE


class HistorySourceFilter(admin.SimpleListFilter):
    """A history record's source, from the sources there can be (no query)."""

    title = "source"
    parameter_name = "history_source"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [(source, source) for source in SOURCES]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(history_source=value) if value else queryset
