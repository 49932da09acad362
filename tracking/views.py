"""The MLflow pages (docs/pages.md): a study's connection, the runs of an
experiment previewed with their metrics, the mapping and the import with its
change report; and a succeeded run's decision published to MLflow.

Designer only (403 for other members, 404 for outsiders). Each POST calls
one service of ``tracking.services``; a refusal is shown on the form it came
from, naming the field, with nothing written: never a 500.
"""

from typing import Any, cast

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.paginator import Page, Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from engine.models import Run
from engine.views.common import run_for_member
from workspace import selectors as workspace_selectors
from workspace.errors import InvalidInput, ServiceError
from workspace.models import Study
from workspace.views.common import require_designer, study_for_member

from . import selectors, services
from .forms import ConnectionForm, ImportForm, RunSearchForm
from .models import MlflowImport
from .remote import Experiment

# Runs previewed a page.
RUNS_PER_PAGE = 25


def _designer_study(request: HttpRequest, study_id: int) -> Study:
    study = study_for_member(request, study_id)
    require_designer(study, "connect the study to MLflow")
    return study


def _page(study: Study) -> str:
    return f"/studies/{study.pk}/mlflow/"


def refusal_on(form: forms.BaseForm, error: ServiceError, names: dict[str, str] | None = None) -> None:
    """A service's refusal on the form: each message under the field it
    names (``names``: the service's paths that are form fields by another
    name); others (a run, the server) above the form, the path they name in
    front."""
    if not isinstance(error, InvalidInput):
        form.add_error(None, str(error))
        return
    for path, texts in error.errors.items():
        path = (names or {}).get(path, path)
        if path in form.fields:
            form.add_error(path, list(texts))
        else:
            form.add_error(None, [f"{path}: {text}" for text in texts])


def _runs_preview(study: Study, search: RunSearchForm, name_tag: str | None = None) -> services.Preview | None:
    """The runs the valid search finds (matched to the candidates by
    ``name_tag``, else by name); none, the refusal on the search form, when
    the service refuses."""
    try:
        return services.import_preview(
            study=study,
            experiment=search.cleaned_data["experiment"],
            filter=search.cleaned_data["filter"],
            name_tag=name_tag,
        )
    except ServiceError as error:
        refusal_on(search, error)
        return None


def _experiments(study: Study) -> tuple[list[Experiment] | None, str]:
    """The server's experiments for the picker, or None (the name or id is
    then typed) with why: more than can be listed, or the server's refusal."""
    try:
        experiments, more = services.experiment_list(study=study)
    except ServiceError as error:
        return None, f"The experiments could not be listed: {error}"
    if more:
        return None, f"The server has more than {len(experiments)} experiments: type the name or id."
    return experiments, ""


def _named_like(preview: services.Preview | None) -> dict[str, tuple[str, str]]:
    """The runs of the preview named like an existing candidate: ``{run id: (run name, candidate)}``."""
    if preview is None:
        return {}
    names = {run.run_id: run.name for run in preview.runs}
    return {run_id: (names[run_id], candidate) for run_id, candidate in preview.named_like.items()}


def _run_rows(preview: services.Preview, page: Page, keys: list[str]) -> list[dict[str, Any]]:
    """The page's runs: each run, its value of each key (None: none), and
    the candidate it updates (imported before) or is named like."""
    return [
        {
            "run": run,
            "values": [run.metrics.get(key) for key in keys],
            "linked": preview.linked.get(run.run_id),
            "named_like": preview.named_like.get(run.run_id),
        }
        for run in page.object_list
    ]


def _import_report(request: HttpRequest, study: Study) -> MlflowImport | None:
    """The import whose change report ``?report=`` asks for, if any."""
    report_id = request.GET.get("report", "")
    return selectors.import_get(study=study, import_id=int(report_id)) if report_id.isdigit() else None


def _new_import_form(study: Study, search: RunSearchForm) -> tuple[ImportForm | None, services.Preview | None]:
    """The mapping form for the runs the search finds, and their preview;
    none while nothing is searched, or the search is refused."""
    preview = _runs_preview(study, search) if search.is_valid() else None
    if preview is None:
        return None, None
    form = ImportForm(
        initial=search.cleaned_data,
        metrics=list(workspace_selectors.metric_list(study=study)),
        keys=preview.metric_keys,
        named_like=_named_like(preview),
    )
    return form, preview


def _mlflow_page(
    request: HttpRequest,
    study: Study,
    *,
    connection_form: ConnectionForm | None = None,
    refused: tuple[ImportForm, services.Preview | None] | None = None,
) -> HttpResponse:
    """The MLflow page: the connection, the experiment picker, the runs
    previewed and the mapping form (a new one, unless ``refused``: the
    refused import form shown again, with the runs its experiment and
    filter find), the imports; the change report alone when the progress is
    polled."""
    report = _import_report(request, study)
    if report is not None and request.headers.get("HX-Request"):
        # The progress polled: the report alone.
        return render(request, "tracking/_import_report.html", {"study": study, "report": report})
    connection = selectors.connection_get(study=study)
    experiments, experiments_note = _experiments(study) if connection is not None else (None, "")
    import_form: ImportForm | None
    preview: services.Preview | None
    if refused is not None:
        import_form, preview = refused
        data = {name: refused[0].data.get(name, "") for name in ("experiment", "filter")}
        search = RunSearchForm(data, experiments=experiments)
        search.is_valid()
    else:
        search = RunSearchForm(request.GET if "experiment" in request.GET else None, experiments=experiments)
        import_form, preview = _new_import_form(study, search) if connection is not None else (None, None)
    page = Paginator(preview.runs, RUNS_PER_PAGE).get_page(request.GET.get("page")) if preview else None
    keys = preview.metric_keys if preview else []
    context = {
        "study": study,
        "study_tab": "mlflow",
        "connection": connection,
        "connection_form": connection_form
        or ConnectionForm(initial={"tracking_uri": connection.tracking_uri if connection else ""}),
        "search_form": search,
        "experiments_note": experiments_note,
        "preview": preview,
        "page": page,
        "keys": keys,
        "run_rows": _run_rows(preview, page, keys) if preview and page else [],
        "import_form": import_form,
        "imports": selectors.import_rows(study=study, most=10),
        "report": report,
    }
    return render(request, "tracking/mlflow.html", context)


@login_required
@require_GET
def mlflow_page(request: HttpRequest, study_id: int) -> HttpResponse:
    """The connection, then (``?experiment=&filter=``) the matching runs
    with their metrics and the mapping form; ``?report=`` shows an import's
    change report."""
    return _mlflow_page(request, _designer_study(request, study_id))


@login_required
@require_POST
def connection_save(request: HttpRequest, study_id: int) -> HttpResponse:
    """Connect (or reconnect) the study, once the server answers."""
    study = _designer_study(request, study_id)
    form = ConnectionForm(request.POST)
    if form.is_valid():
        try:
            connection = services.connection_set(
                study=study,
                tracking_uri=form.cleaned_data["tracking_uri"],
                token=form.cleaned_data["token"] or None,
            )
        except ServiceError as error:
            refusal_on(form, error)
        else:
            found = connection.experiment_count
            messages.success(
                request,
                f"Connected to {connection.tracking_uri}: {found} experiment{'' if found == 1 else 's'} found.",
            )
            return redirect(_page(study))
    return _mlflow_page(request, study, connection_form=form)


def _posted_preview(study: Study, request: HttpRequest) -> services.Preview | None:
    """The runs the posted experiment and filter find, matched by the posted
    name tag (None when the service refuses: the import then says why)."""
    search = RunSearchForm({name: request.POST.get(name, "") for name in ("experiment", "filter")})
    if not search.is_valid():
        return None
    name_tag = request.POST.get("name_tag", "")
    return _runs_preview(study, search, name_tag if isinstance(name_tag, str) and name_tag.strip() else None)


def _import_form(
    request: HttpRequest, study: Study, preview: services.Preview | None, classes: list[str] | None = None
) -> ImportForm:
    """The posted mapping form, its key lists every key the preview's runs
    have (and any posted), its questions the runs named like a candidate."""
    # QueryDict.items() gives each field's last value, a string.
    posted = {value for name, value in request.POST.items() if name.startswith("key_") and isinstance(value, str)}
    keys = sorted({*(preview.metric_keys if preview else []), *(key for key in posted if key)})
    metrics = list(workspace_selectors.metric_list(study=study))
    return ImportForm(request.POST, metrics=metrics, keys=keys, named_like=_named_like(preview), classes=classes)


def _imported(request: HttpRequest, study: Study, outcome: services.ImportOutcome | MlflowImport) -> HttpResponse:
    """Where an import leads: its change report (or progress), said above it."""
    if isinstance(outcome, MlflowImport):
        messages.info(request, f"{outcome.runs_total} runs to import: the import runs in the background.")
        return redirect(f"{_page(study)}?report={outcome.pk}#report")
    changed, skipped = len(outcome.changes), len(outcome.skipped)
    left_out = f", {skipped} run{'' if skipped == 1 else 's'} skipped" if skipped else ""
    messages.success(
        request,
        f"{outcome.runs} run{'' if outcome.runs == 1 else 's'} imported: "
        f"{changed} value{'' if changed == 1 else 's'} changed, {outcome.unchanged} unchanged{left_out}.",
    )
    return redirect(f"{_page(study)}?report={outcome.import_id}#report")


@login_required
@require_POST
def mlflow_import(request: HttpRequest, study_id: int) -> HttpResponse:
    """Import the runs the mapping form names; the change report follows.
    Refused, the form is shown again with every key and run the experiment
    offers (read again), not only those chosen."""
    study = _designer_study(request, study_id)
    preview = _posted_preview(study, request)
    form = _import_form(request, study, preview)
    if form.is_valid():
        data = form.cleaned_data
        try:
            outcome = services.mlflow_import(
                study=study,
                imported_by=cast(User, request.user),  # (login_required)
                experiment=data["experiment"],
                filter=data["filter"],
                mapping=form.mapping(),
                step=data["step"],
                name_tag=data["name_tag"] or None,
                artifact_pattern=data["artifact_pattern"] or None,
                positive=data["positive"] or None,
                on_existing=form.on_existing(),
            )
        except services.PositiveLabelNeeded as error:
            # The artifacts carry scores: the positive label asked, a choice of their classes.
            form = _import_form(request, study, preview, classes=error.classes)
            form.is_valid()
            refusal_on(form, error, form.field_names())
        except ServiceError as error:
            refusal_on(form, error, form.field_names())
        else:
            return _imported(request, study, outcome)
    return _mlflow_page(request, study, refused=(form, preview))


@login_required
@require_http_methods(["GET", "POST"])
def publish_page(request: HttpRequest, run_id: int) -> HttpResponse:
    """A succeeded run's decision published to MLflow: GET asks to confirm
    (and shows the last publication), POST publishes."""
    run, study = run_for_member(request, run_id, results="results_core")
    require_designer(study, "publish a run to MLflow")
    error = None
    if run.status != Run.Status.SUCCEEDED:
        error = f"Run {run.number} is {run.status}: only a succeeded run can be published."
    elif request.method == "POST":
        run_url = request.build_absolute_uri(reverse("run_page", kwargs={"run_id": run.pk}))
        try:
            publication = services.mlflow_publish(run=run, published_by=cast(User, request.user), run_url=run_url)
        except ServiceError as refused:
            error = str(refused)
        else:
            messages.success(
                request,
                f"Published to {publication.tracking_uri}: {len(publication.tagged)} runs tagged, "
                f"summary run {publication.summary_run_id}.",
            )
            return redirect(reverse("mlflow_publish", kwargs={"run_id": run.pk}))
    context = {
        "study": study,
        "study_tab": "runs",
        "run": run,
        "connection": selectors.connection_get(study=study),
        "publication": selectors.publication_get(run=run),
        "error": error,
    }
    return render(request, "tracking/publish.html", context, status=200)
