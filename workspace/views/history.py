"""The study's *History* tab (``/studies/{id}/history/``): every recorded
change the member may see, filterable by person, kind and date, paged, and
downloadable as CSV or JSON (``?format=csv`` / ``?format=json``, all the
filtered records). Read-only: nothing here changes or deletes a record."""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponseBase
from django.shortcuts import render
from django.views.decorators.http import require_GET

from .. import limits, selectors
from ..downloads import download
from ..errors import InvalidInput
from ..history import KINDS, SOURCES, kind_label
from ..history_export import history_csv, history_json
from .common import study_for_member


@login_required
@require_GET
def history_page(request: HttpRequest, study_id: int) -> HttpResponseBase:
    study = study_for_member(request, study_id)
    errors: dict[str, list[str]] = {}
    try:
        filters = selectors.history_filter_parse(request.GET)
    except InvalidInput as error:
        errors = error.errors
        filters = selectors.HistoryFilter()
    export = request.GET.get("format")
    if export in ("csv", "json") and not errors:
        entries = selectors.history_all(study=study, user=request.user, filters=filters)
        content, kind = (
            (history_csv(entries).encode(), "text/csv; charset=utf-8")
            if export == "csv"
            else (history_json(entries), "application/json")
        )
        return download(content, kind, filename=f"approve-study-{study.pk}-history.{export}")
    pages = selectors.HistoryPages(study=study, user=request.user, filters=filters)
    page = Paginator(pages, limits.HISTORY_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    query.pop("format", None)
    context = {
        "study": study,
        "study_tab": "history",
        "page": page,
        "filters": filters,
        "errors": errors,
        "kinds": [(kind, kind_label(kind)) for kind in KINDS],
        "sources": SOURCES,
        "people": selectors.history_people(study=study),
        "query": query.urlencode(),
    }
    return render(request, "history/history.html", context, status=400 if errors else 200)
