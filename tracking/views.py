"""The MLflow pages (docs/pages.md): a study's connection, the runs of an
experiment previewed with their metrics, the mapping and the import with its
change report; and a succeeded run's decision published to MLflow.

Designer only (403 for other members, 404 for outsiders). Each POST calls
one service of ``tracking.services``; a refusal is shown on the form it came
from, naming the field, with nothing written: never a 500.
"""

from typing import cast

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


def _runs_preview(
    request: HttpRequest, study: Study, search: RunSearchForm
) -> tuple[services.Preview | None, Page | None]:
    """The runs the valid search finds, and the page of them shown; none,
    the refusal on the search form, when the service refuses."""
    try:
        preview = services.import_preview(
            study=study, experiment=search.cleaned_data["experiment"], filter=search.cleaned_data["filter"]
        )
    except ServiceError as error:
        refusal_on(search, error)
        return None, None
    return preview, Paginator(preview.runs, RUNS_PER_PAGE).get_page(request.GET.get("page"))


def _import_report(request: HttpRequest, study: Study) -> MlflowImport | None:
    """The import whose change report ``?report=`` asks for, if any."""
    report_id = request.GET.get("report", "")
    return selectors.import_get(study=study, import_id=int(report_id)) if report_id.isdigit() else None


def _mlflow_page(
    request: HttpRequest,
    study: Study,
    *,
    connection_form: ConnectionForm | None = None,
    import_form: ImportForm | None = None,
) -> HttpResponse:
    """The MLflow page: the connection, the runs previewed and the mapping
    form (a new one unless ``import_form``, refused, is shown again), the
    imports; the change report alone when the progress is polled."""
    connection = selectors.connection_get(study=study)
    search = RunSearchForm(request.GET if "experiment" in request.GET else None)
    preview, page = None, None
    # (The data of a refused import form, shown again; a new form has none.)
    data = import_form.data if import_form is not None else None
    if import_form is None and connection is not None and search.is_valid():
        preview, page = _runs_preview(request, study, search)
    if import_form is None and preview is not None:
        import_form = ImportForm(
            initial=search.cleaned_data,
            metrics=list(workspace_selectors.metric_list(study=study)),
            keys=preview.metric_keys,
        )
    report = _import_report(request, study)
    if report is not None and request.headers.get("HX-Request"):
        # The progress polled: the report alone.
        return render(request, "tracking/_import_report.html", {"study": study, "report": report})
    imports = list(selectors.import_list(study=study)[:10])
    context = {
        "study": study,
        "study_tab": "mlflow",
        "connection": connection,
        "connection_form": connection_form
        or ConnectionForm(initial={"tracking_uri": connection.tracking_uri if connection else ""}),
        "search_form": search,
        "preview": preview,
        "page": page,
        "keys": preview.metric_keys if preview else [],
        "import_form": import_form,
        "import_data": data,
        "imports": imports,
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


@login_required
@require_POST
def mlflow_import(request: HttpRequest, study_id: int) -> HttpResponse:
    """Import the runs the mapping form names; the change report follows."""
    study = _designer_study(request, study_id)
    metrics = list(workspace_selectors.metric_list(study=study))
    # QueryDict.items() gives each field's last value, a string.
    keys = sorted(
        {value for name, value in request.POST.items() if name.startswith("key_") and isinstance(value, str) and value}
    )
    form = ImportForm(request.POST, metrics=metrics, keys=keys)
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
            )
        except ServiceError as error:
            refusal_on(form, error, form.field_names())
        else:
            if isinstance(outcome, MlflowImport):
                messages.info(request, f"{outcome.runs_total} runs to import: the import runs in the background.")
                return redirect(f"{_page(study)}?report={outcome.pk}#report")
            changed = len(outcome.changes)
            messages.success(
                request,
                f"{outcome.runs} run{'' if outcome.runs == 1 else 's'} imported: "
                f"{changed} value{'' if changed == 1 else 's'} changed, {outcome.unchanged} unchanged.",
            )
            return redirect(f"{_page(study)}?report={outcome.import_id}#report")
    return _mlflow_page(request, study, import_form=form)


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
