"""The evaluation app's pages, the designer's: prediction sets (upload,
delete), study metrics computed from them (map, compute), each candidate's
report (confusion matrix, ROC, lift and gain, every value with its
definition) and the candidates of a set compared (A3R, ARR).

Views check the role and the shape of the input and call one service; the
numbers come from ``evaluation.report`` on the stored arrays, the pictures
from ``workspace.charts``.
"""

import statistics
from typing import Any, cast

import numpy as np
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from workspace import charts, limits
from workspace import selectors as workspace_selectors
from workspace import services as workspace_services
from workspace.errors import InvalidInput, PhaseConflict
from workspace.models import Membership, Metric, Phase, Study
from workspace.views.common import form_add_service_errors, require_designer, require_expert, study_for_member

from . import elicited as elicited_domain
from . import metrics, report, selectors, services
from .forms import (
    ComputationForm,
    ElicitationAnswerForm,
    ElicitationDesignForm,
    ElicitationRatioForm,
    PredictionUploadForm,
    ReportOptionsForm,
)
from .models import ElicitedMetric, PredictionSet


def _designer_study(request: HttpRequest, study_id: int) -> Study:
    study = study_for_member(request, study_id)
    require_designer(study, "work with predictions")
    return study


def _page(study: Study) -> str:
    return f"/studies/{study.pk}/predictions/"


# --- sets and mappings ---------------------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
@limits.max_body(limits.PREDICTIONS_MAX_BYTES + limits.MB)
def predictions_page(request: HttpRequest, study_id: int) -> HttpResponse:
    """The study's prediction sets with the upload form, and its metrics
    with what each is computed from; a POST uploads a file."""
    study = _designer_study(request, study_id)
    candidates = list(workspace_selectors.candidate_list(study=study))
    form = PredictionUploadForm(request.POST or None, request.FILES or None, candidates=candidates)
    file_errors: list[str] = []
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            prediction_set = services.prediction_set_import(
                study=study,
                stream=upload,
                name=upload.name,
                uploaded_by=cast(User, request.user),  # (login_required)
                candidate=form.cleaned_data["candidate"] or None,
                positive=form.cleaned_data["positive"] or None,
            )
        except InvalidInput as error:
            file_errors = error.errors.pop("file", [])
            if error.errors:
                form_add_service_errors(form, InvalidInput(error.errors))
        else:
            count = selectors.prediction_set_candidate_count(prediction_set=prediction_set)
            messages.success(
                request,
                f"{prediction_set.name} was stored: {prediction_set.row_count} rows for {count} "
                f"candidate{'s' if count != 1 else ''}.",
            )
            return redirect(_page(study))
    context = {
        "study": study,
        "study_tab": "predictions",
        "form": form,
        "file_errors": file_errors,
        "sets": list(selectors.prediction_set_list(study=study)),
        "metrics": selectors.metrics_with_computations(study=study),
        "max_megabytes": limits.PREDICTIONS_MAX_BYTES // limits.MB,
        "max_rows": limits.PREDICTIONS_MAX_ROWS,
        "max_classes": limits.PREDICTIONS_MAX_CLASSES,
    }
    return render(request, "evaluation/predictions.html", context, status=400 if request.method == "POST" else 200)


def _set(study: Study, set_id: int, *, contexts: bool = False) -> PredictionSet:
    try:
        return selectors.prediction_set_get(study=study, prediction_set_id=set_id, contexts=contexts)
    except PredictionSet.DoesNotExist:
        raise Http404("No such prediction set.") from None


@login_required
@require_http_methods(["GET", "POST"])
def prediction_set_delete(request: HttpRequest, study_id: int, set_id: int) -> HttpResponse:
    study = _designer_study(request, study_id)
    prediction_set = _set(study, set_id)
    if request.method == "POST":
        try:
            services.prediction_set_delete(prediction_set=prediction_set)
        except InvalidInput as error:
            messages.error(request, " ".join(m for found in error.errors.values() for m in found))
        else:
            messages.success(request, f"The prediction set {prediction_set.name} was deleted.")
        return redirect(_page(study))
    count = len(prediction_set.candidate_arrays.all())
    consequences = [
        f"Its {prediction_set.row_count} rows of predictions for {count} candidate{'s' if count != 1 else ''} "
        "are deleted.",
        "Measurements computed from it keep their values, and say they came from a deleted set.",
        "Measurements computed later come from each candidate's newest remaining set.",
    ]
    context = {
        "study": study,
        "study_tab": "predictions",
        "title": f"Delete the prediction set {prediction_set.name}?",
        "consequences": consequences,
        "button": "Delete the set",
        "cancel": _page(study),
    }
    return render(request, "designer/confirm.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def computation_page(request: HttpRequest, study_id: int, metric_id: int) -> HttpResponse:
    """What one study metric is computed from: choose the computation and
    its parameters, or stop computing it (``remove``)."""
    study = _designer_study(request, study_id)
    try:
        metric = selectors.metric_with_computation_get(study=study, metric_id=metric_id)
    except Metric.DoesNotExist:
        raise Http404("No such metric.") from None
    mapping = getattr(metric, "computation", None)
    candidates = list(workspace_selectors.candidate_list(study=study))
    if request.method == "POST" and "remove" in request.POST:
        services.metric_computation_remove(metric=metric)
        messages.success(request, f"{metric.name} is no longer computed from predictions; its values stay.")
        return redirect(_page(study))
    form = ComputationForm(
        request.POST or None,
        metric=metric,
        candidates=candidates,
        initial=ComputationForm.initial_for(mapping, candidates),
    )
    if request.method == "POST" and form.is_valid():
        try:
            services.metric_computation_set(
                metric=metric, computation=form.cleaned_data["computation"], parameters=form.parameters()
            )
        except InvalidInput as error:
            _service_errors_on_fields(form, error)
        else:
            name = report.COMPUTATIONS[form.cleaned_data["computation"]].name
            messages.success(
                request, f"{metric.name} will be computed as {name}. Compute the measurements to fill it in."
            )
            return redirect(_page(study))
    context = {
        "study": study,
        "study_tab": "predictions",
        "metric": metric,
        "mapping": mapping,
        "form": form,
        "computations": [c for c in report.COMPUTATIONS.values() if c.better == metric.better],
    }
    return render(request, "evaluation/computation.html", context, status=400 if form.errors else 200)


def _service_errors_on_fields(form: ComputationForm, error: InvalidInput) -> None:
    """The service names ``parameters.<name>``; the form's fields are
    ``<name>`` (and ``n_parameters_<candidate id>``)."""
    by_name = {name: candidate for candidate, name in form.candidate_fields}
    renamed = {}
    for path, messages_ in error.errors.items():
        name = path.removeprefix("parameters.")
        if name.startswith("n_parameters."):
            candidate = name.split(".", 1)[1]
            name = next((field for field, c in by_name.items() if c.name == candidate), "n_parameters")
        renamed[name if name in form.fields else path] = messages_
    form_add_service_errors(form, InvalidInput(renamed))


@login_required
@require_POST
def compute_page(request: HttpRequest, study_id: int) -> HttpResponse:
    """Compute every mapped metric now, and say what changed."""
    study = _designer_study(request, study_id)
    outcome = services.measurements_compute(study=study)
    context = {"study": study, "study_tab": "predictions", "outcome": outcome}
    return render(request, "evaluation/computed.html", context)


# --- one candidate's report ------------------------------------------------------------------


def _not_evaluated(
    request: HttpRequest, study: Study, prediction_set: PredictionSet, error: InvalidInput
) -> HttpResponse:
    """A set that cannot be evaluated (more labels than allowed): the page says why."""
    reason = " ".join(message for messages_ in error.errors.values() for message in messages_)
    context = {
        "study": study,
        "study_tab": "predictions",
        "prediction_set": prediction_set,
        "reason": reason,
    }
    return render(request, "evaluation/not_evaluated.html", context, status=409)


def _report_options(form: ReportOptionsForm) -> report.Options:
    """The options of a report page, checked by the service as the API's are;
    the defaults, with the errors on the form, when any is refused."""
    try:
        return services.report_options(form.given())
    except InvalidInput as error:
        form_add_service_errors(form, error)
        return report.Options()


def _values(summary: dict) -> list[dict]:
    """Every computation with its value, why it is undefined, or what it needs."""
    return [{"computation": computation, **summary["values"][key]} for key, computation in report.COMPUTATIONS.items()]


def _confusion(counts: list[list[int]], labels: list[str]) -> dict:
    totals = [sum(row) for row in counts]
    rows = [
        {
            "label": label,
            "cells": [
                {"count": count, "share": count / totals[i] if totals[i] else None, "diagonal": i == j}
                for j, count in enumerate(counts[i])
            ],
            "total": totals[i],
        }
        for i, label in enumerate(labels)
    ]
    return {"labels": labels, "rows": rows}


def _curves(numbers: dict, name: str) -> dict:
    """The ROC curve, and the lift and cumulative gain charts (binary, with
    scores), from the report's kept numbers (``report.candidate_summary``)."""
    if "reason" in numbers:
        return {"reason": numbers["reason"]}
    auc = numbers["auc"]
    fpr, tpr = np.array(numbers["fpr"]), np.array(numbers["tpr"])
    fractions, gain, lift = (np.array(numbers[key]) for key in ("fractions", "gain", "lift"))
    roc = charts.line_chart(
        chart_id="chart-roc",
        title=f"ROC curve of {name} (AUC {auc:.3f})",
        description=(
            f"The true positive rate against the false positive rate as the threshold falls, from {len(fpr)} points; "
            f"the dashed diagonal is guessing. The area under the curve is {auc:.3f}."
        ),
        lines=[(name, "solid", fpr.tolist(), tpr.tolist(), False)],
        x_range=(0, 1),
        y_range=(0, 1),
        x_label="False positive rate (1 - specificity)",
        y_label="True positive rate (sensitivity)",
        diagonal=True,
    )
    xs = [0.0, *fractions.tolist()]
    gain_chart = charts.line_chart(
        chart_id="chart-gain",
        title=f"Cumulative gain of {name}",
        description=(
            "The share of all positives found among the top-scored share of the cases, per tenth; the dashed "
            f"diagonal is picking at random. The top tenth holds {gain[0]:.0%} of the positives."
        ),
        lines=[(name, "solid", xs, [0.0, *gain.tolist()], True)],
        x_range=(0, 1),
        y_range=(0, 1),
        x_label="Share of the cases, best scores first",
        y_label="Share of the positives found",
        diagonal=True,
    )
    lift_chart = charts.line_chart(
        chart_id="chart-lift",
        title=f"Lift of {name}",
        description=(
            "How many times more positives the top-scored share of the cases holds than a random share of the same "
            f"size, per tenth; the dashed line at 1 is picking at random. The top tenth's lift is {lift[0]:.2f}."
        ),
        lines=[
            (name, "solid", fractions.tolist(), lift.tolist(), True),
            ("random", "dashed", [fractions[0], 1.0], [1.0, 1.0], False),
        ],
        x_range=(0, 1),
        y_range=(0, charts.nice_ceiling(max(float(lift.max()), 1.0))),
        x_label="Share of the cases, best scores first",
        y_label="Lift",
    )
    table = [
        {"fraction": f, "gain": g, "lift": lf}
        for f, g, lf in zip(fractions.tolist(), gain.tolist(), lift.tolist(), strict=True)
    ]
    return {"roc": roc, "gain": gain_chart, "lift": lift_chart, "table": table, "auc": auc}


@login_required
@require_GET
def candidate_report_page(request: HttpRequest, study_id: int, set_id: int, name: str) -> HttpResponse:
    study = _designer_study(request, study_id)
    prediction_set = _set(study, set_id)
    if name not in {row.candidate.name for row in prediction_set.candidate_arrays.all()}:
        raise Http404("No such candidate in this set.")
    options_form = ReportOptionsForm(request.GET or None)
    options = _report_options(options_form)
    try:
        # Computed the first time these options are asked for, then kept with the set.
        summary = services.candidate_report_summary(prediction_set=prediction_set, name=name, options=options)
    except InvalidInput as error:
        return _not_evaluated(request, study, prediction_set, error)
    if summary["threshold_refusal"]:
        options_form.add_error("threshold_method", f"No threshold can be applied: {summary['threshold_refusal']}.")
    context = {
        "study": study,
        "study_tab": "predictions",
        "prediction_set": prediction_set,
        "name": name,
        "instances": summary["instances"],
        "options_form": options_form,
        "threshold": summary["threshold"],
        "labels_shown": summary["labels_shown"],
        "threshold_reason": summary["threshold_reason"],
        "confusion": _confusion(summary["confusion"], summary["label_names"]) if summary["confusion"] else None,
        "curves": _curves(summary["curves"], name),
        "values": _values(summary),
    }
    return render(request, "evaluation/report.html", context)


# --- the candidates of a set compared ------------------------------------------------------------


def _a3r_chart(names: list[str], success: np.ndarray, time: np.ndarray, options: report.Options) -> dict:
    """A3R of every candidate against every other, placed at their time ratio,
    with A3R's and ARR's curves for equal success rates and the region where
    ARR is undefined shaded."""
    ratios = time[:, None] / time[None, :]
    pairwise = metrics.a3r(success, time, root=options.root)
    off = ~np.eye(len(names), dtype=bool)
    pole = metrics.arr_pole(acc_d=options.acc_d)
    lowest = min(ratios[off].min(), pole if pole > 0 else ratios[off].min()) / 10
    highest = max(ratios[off].max() * 10, 10.0)
    grid = np.logspace(np.log10(lowest), np.log10(highest), 120)
    a3r_curve = grid ** (-1 / options.root)
    arr_grid = grid[grid > pole * 1.05] if pole > 0 else grid
    arr_curve = 1 / (1 + options.acc_d * np.log10(arr_grid))
    top = charts.nice_ceiling(max(2.0, float(pairwise[off].max()) * 1.2))
    # Curves are drawn where they lie inside the plot, not flattened against its edge.
    inside = a3r_curve <= top
    keep = (arr_curve > 0) & (arr_curve <= top)
    points = [(float(r), float(v)) for r, v in zip(ratios[off].tolist(), pairwise[off].tolist(), strict=True)]
    chart = charts.line_chart(
        chart_id="chart-a3r",
        title="A3R against the time ratio",
        description=(
            f"For every pair of candidates, a dot at the ratio of their times per instance and the first's A3R "
            f"against the second (root {options.root:g}). The solid curve is A3R for equal success rates, the "
            f"dashed curve ARR (AccD {options.acc_d:g}); the shaded band, time ratios at or below {pole:.3g}, is "
            "where ARR is undefined or stops falling. The table lists every pair."
        ),
        lines=[
            ("A3R, equal success rates", "solid", grid[inside].tolist(), a3r_curve[inside].tolist(), False),
            ("ARR, equal success rates", "dashed", arr_grid[keep].tolist(), arr_curve[keep].tolist(), False),
            ("pairs of candidates", "points", [p[0] for p in points], [p[1] for p in points], True),
        ],
        x_range=(float(lowest), float(highest)),
        y_range=(0, top),
        x_label="Time ratio T_p / T_q (log scale)",
        y_label="A3R of p against q",
        x_log=True,
        shade=(float(lowest), pole, "ARR undefined") if pole > lowest else None,
    )
    pairs = [
        {"p": names[p], "q": names[q], "ratio": ratios[p, q], "a3r": pairwise[p, q]}
        for p in range(len(names))
        for q in range(len(names))
        if p != q
    ]
    return {"chart": chart, "pairs": pairs, "pole": pole}


# The metrics a set's comparison shows.
#: The most experts whose values of an elicited metric the design page shows
#: in a column each; with more, it shows the median and the spread.
ELICITED_COLUMNS_MAX = 8

COMPARED = ("accuracy", "efficiency", "a3r", "arr")


@login_required
@require_GET
def set_compare_page(request: HttpRequest, study_id: int, set_id: int) -> HttpResponse:
    study = _designer_study(request, study_id)
    prediction_set = _set(study, set_id)
    options_form = ReportOptionsForm(request.GET or None)
    options = _report_options(options_form)
    try:
        # The whole document, kept with the set (the API's for the same options).
        document = services.prediction_set_evaluation(prediction_set=prediction_set, options=options)
    except InvalidInput as error:
        return _not_evaluated(request, study, prediction_set, error)
    names = list(document["candidates"])
    rows = [
        {
            "name": name,
            "values": {key: value for key, value in document["candidates"][name].items() if key in COMPARED},
            "notes": {key: note for key, note in document["notes"].get(name, {}).items() if key in COMPARED},
        }
        for name in names
    ]
    context = {
        "study": study,
        "study_tab": "predictions",
        "prediction_set": prediction_set,
        "rows": rows,
        "options_form": options_form,
        "options": options,
    }
    success = [row["values"].get("accuracy") for row in rows]
    # The mean time per instance is the efficiency.
    times = [row["values"]["efficiency"] for row in rows if row["values"].get("efficiency") is not None]
    has_times = len(names) > 1 and len(times) == len(names)
    if not has_times:
        context["a3r_reason"] = "A3R and ARR need a time column and two candidates or more."
    elif None in success:
        context["a3r_reason"] = "A3R needs every candidate's accuracy, and one is undefined here."
    else:
        try:
            context["a3r"] = _a3r_chart(names, np.array(success), np.array(times), options)
        except ValueError as error:
            context["a3r_reason"] = str(error)
    return render(request, "evaluation/compare.html", context)


# --- elicited metrics: the designer's design, the expert's step -------------------------------------


def _elicited(study: Study, metric_id: int, answers_of: Membership | None = None) -> ElicitedMetric:
    try:
        return selectors.elicited_metric_get(study=study, metric_id=metric_id, answers_of=answers_of)
    except ElicitedMetric.DoesNotExist:
        raise Http404("No such elicited metric.") from None


def _weights_chart(chart_id: str, result: elicited_domain.Result, who: str) -> charts.BarChart:
    return charts.bar_chart(
        chart_id=chart_id,
        title=f"{who} weights",
        description=result.sentence,
        labels=result.labels,
        series=[charts.Series("weight", "solid")],
        values=[result.values],
        high=charts.nice_ceiling(max(result.values) or 1.0),
        value_format="{:.3f}",
    )


def _elicitation_overview(
    study: Study, metric: Metric, current: ElicitedMetric, answered: dict[tuple[int, int], Any], page: str | None
) -> dict[str, Any]:
    """The design page's progress of each expert and, once the assessment
    has closed, the finished experts' values of each candidate (every
    expert's column while they fit a page, beyond that the median), a page
    of ``limits.CANDIDATES_PER_PAGE`` candidates (``page``, as the
    measurements table)."""
    progress: list[dict[str, Any]] = []
    # The finished experts' weights, once the assessment has closed: {username: weights}.
    finished: dict[str, list[float]] = {}
    closed = study.phase == Phase.CLOSED
    total = elicited_domain.elicitation_replayed(current, "").total_queries
    for expert in workspace_selectors.expert_list(study=study):
        row = answered.get((metric.pk, expert.pk))
        weights = row.weights if row is not None else None
        result = None
        if closed and row is not None and row.weights is not None:
            finished[expert.user.get_username()] = row.weights
            result = elicited_domain.result_of(current, row.weights, row.answers, row.typed_ratios)
        progress.append(
            {
                "name": expert.user.get_username(),
                "answered": len(row.answers) if row is not None else 0,
                "finished": weights is not None,
                "consistent": elicited_domain.consistent(row.answers, total) if row is not None else None,
                "result": result,
            }
        )
    values = selectors.elicited_values(elicited_metric=current, finished=finished) if finished else []
    by_expert = len(finished) <= ELICITED_COLUMNS_MAX
    values_page = Paginator(values, limits.CANDIDATES_PER_PAGE).get_page(page)
    rows = [
        {
            "candidate": value.candidate,
            "prediction_set": value.prediction_set,
            "reason": value.reason,
            "spread": value.spread,
            "cells": [value.values[name] for name in finished]
            if by_expert
            else [statistics.median(value.values.values())],
        }
        for value in values_page.object_list
    ]
    diagonal = current.kind == ElicitedMetric.Kind.DIAGONAL
    return {
        "progress": progress,
        "reference_ranges": elicited_domain.reference_ranges(current) if diagonal else [],
        "values": rows,
        "page": values_page,
        "values_by_expert": by_expert,
        "finished_experts": list(finished),
    }


def _design_metric(study: Study, metric_id: int) -> Metric:
    """The study metric the design page is about, with its computation;
    404 when the study has no such metric."""
    try:
        return selectors.metric_with_computation_get(study=study, metric_id=metric_id)
    except Metric.DoesNotExist:
        raise Http404("No such metric.") from None


def _answering_experts(metric: Metric, answered: dict[tuple[int, int], Any]) -> list[int]:
    """The experts whose answers a change or a removal would delete (the
    page asks first), in order."""
    return sorted(row.expert_id for (metric_id, _), row in answered.items() if metric_id == metric.pk and row.answers)


def _removal_unconfirmed(request: HttpRequest, answering: list[int]) -> bool:
    """Whether the POST asks to stop eliciting while experts have answered
    and has not confirmed it yet (the page then asks)."""
    return (
        request.method == "POST"
        and "remove" in request.POST
        and bool(answering)
        and request.POST["remove"] != "confirm"
    )


def _elicitation_remove(request: HttpRequest, study: Study, metric: Metric) -> HttpResponse:
    """Stop eliciting the metric (its experts' answers deleted), or say why
    the phase refuses; back to the predictions page either way."""
    try:
        services.elicited_metric_remove(metric=metric)
    except PhaseConflict as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"{metric.name} is no longer elicited; the experts' answers to it are deleted.")
    return redirect(_page(study))


def _design_initial(current: ElicitedMetric | None) -> dict[str, Any]:
    """The design form's initial values: the stored design, or none when
    the metric is not elicited yet."""
    if current is None:
        return {}
    return {
        "kind": current.kind,
        "prediction_set": current.prediction_set_id,
        "reference_candidate": current.reference_candidate.name,
        "epsilon": current.epsilon,
    }


def _design_form(
    request: HttpRequest, study: Study, sets: list[Any], candidates: list[Any], initial: dict[str, Any]
) -> tuple[ElicitationDesignForm, str | None]:
    """The design form and the phase's refusal of a change: outside the
    phases that allow one, every field is disabled (the design is shown as
    stored, with why)."""
    form = ElicitationDesignForm(request.POST or None, sets=sets, candidates=candidates, initial=initial)
    refusal = workspace_services.phase_refusal(study, workspace_services.Action.CHANGE_ELICITATION)
    if refusal is not None:
        for field in form.fields.values():
            field.disabled = True
    return form, refusal


def _change_unconfirmed(
    request: HttpRequest, form: ElicitationDesignForm, initial: dict[str, Any], answering: list[int]
) -> bool:
    """Whether the valid POST changes the stored design while experts have
    answered and has not confirmed it yet (the page then asks)."""
    changes = any(form.cleaned_data[name] != value for name, value in initial.items())
    return bool(answering) and changes and "confirm" not in request.POST


def _design_save(
    request: HttpRequest, study: Study, metric: Metric, form: ElicitationDesignForm
) -> tuple[HttpResponse | None, int]:
    """Store the valid design: a redirect to the predictions page when
    stored; otherwise no response, the service's errors on the form and the
    status (409 for a phase conflict, else 200)."""
    try:
        services.elicited_metric_set(metric=metric, **form.cleaned_data)
    except InvalidInput as error:
        form_add_service_errors(form, error)
    except PhaseConflict as error:
        form.add_error(None, str(error))
        return None, 409
    else:
        messages.success(request, f"{metric.name} is elicited from each expert: they answer its questions.")
        return redirect(_page(study)), 200
    return None, 200


@login_required
@require_http_methods(["GET", "POST"])
def elicitation_design_page(request: HttpRequest, study_id: int, metric_id: int) -> HttpResponse:
    """Make a study metric an elicited one, or change how it is elicited
    (``remove``: stop eliciting it); each expert's progress, and their
    results once the assessment has closed."""
    study = _designer_study(request, study_id)
    metric = _design_metric(study, metric_id)
    current = getattr(metric, "elicitation", None)
    sets = list(selectors.prediction_set_choices(study=study))
    candidates = list(workspace_selectors.candidate_list(study=study))
    answered = selectors.elicitation_progress(study=study) if current is not None else {}
    answering = _answering_experts(metric, answered)
    posted = request.method == "POST"
    confirm = "remove" if _removal_unconfirmed(request, answering) else ""
    if not confirm and posted and "remove" in request.POST:
        return _elicitation_remove(request, study, metric)
    initial = _design_initial(current)
    form, refusal = _design_form(request, study, sets, candidates, initial)
    status = 200
    if posted and not confirm and form.is_valid():
        if _change_unconfirmed(request, form, initial, answering):
            confirm = "change"
        else:
            response, status = _design_save(request, study, metric, form)
            if response is not None:
                return response
    overview = (
        _elicitation_overview(study, metric, current, answered, request.GET.get("page")) if current is not None else {}
    )
    context = {
        "study": study,
        "study_tab": "predictions",
        "metric": metric,
        "current": current,
        "values": [],
        "progress": [],
        **overview,
        "form": form,
        "sets": sets,
        "confirm": confirm,
        "refusal": refusal,
        "answering": len(answering),
    }
    return render(request, "evaluation/elicitation_design.html", context, status=400 if form.errors else status)


def _expert_of(request: HttpRequest, study_id: int) -> tuple[Study, Membership]:
    study = study_for_member(request, study_id)
    require_expert(study, "answer an elicited metric's questions")
    expert = next(m for m in study.my_memberships if m.role == Membership.Role.EXPERT)
    expert.study, expert.user = study, cast(User, request.user)
    return study, expert


def _ratio_type(request: HttpRequest, elicited: ElicitedMetric, expert: Membership) -> None:
    """Store the ratio the expert typed for a pair at the edge (or take it back)."""
    form = ElicitationRatioForm(request.POST)
    if not form.is_valid():
        raise InvalidInput({name: list(found) for name, found in form.errors.items()})
    ratio = None if form.cleaned_data["untype"] else form.cleaned_data["ratio"]
    if ratio is None and not form.cleaned_data["untype"]:
        raise InvalidInput({"ratio": ["type the ratio, a number such as 5 for 1 : 5"]})
    services.elicitation_ratio_type(
        elicited_metric=elicited, expert=expert, class_label=form.cleaned_data["class_label"], ratio=ratio
    )
    messages.success(request, "Your typed ratio is stored." if ratio is not None else "Your typed ratio is taken back.")


@login_required
@require_http_methods(["GET", "POST"])
def elicitation_page(request: HttpRequest, study_id: int, metric_id: int) -> HttpResponse:
    """The expert's step for one elicited metric: one question at a time
    (plain forms), "go back one question", and the result with its chart
    and "start again". Every POST redirects back (a reload posts nothing)."""
    study, expert = _expert_of(request, study_id)
    page = reverse("expert_elicitation", args=[study.pk, metric_id])
    if request.method == "POST":
        elicited = _elicited(study, metric_id)
        try:
            if "back" in request.POST:
                services.elicitation_back(elicited_metric=elicited, expert=expert)
            elif "reset" in request.POST:
                services.elicitation_reset(elicited_metric=elicited, expert=expert)
            elif "class_label" in request.POST:
                _ratio_type(request, elicited, expert)
            else:
                form = ElicitationAnswerForm(request.POST)
                if not form.is_valid():
                    raise InvalidInput({name: list(found) for name, found in form.errors.items()})
                services.elicitation_answer(elicited_metric=elicited, expert=expert, **form.cleaned_data)
        except (InvalidInput, PhaseConflict) as error:
            words = error.errors.values() if isinstance(error, InvalidInput) else [[str(error)]]
            messages.error(request, " ".join(m for found in words for m in found))
        return redirect(page)
    # Shown: the expert's answers read with the metric, one query less.
    elicited = _elicited(study, metric_id, answers_of=expert)
    state = selectors.elicitation_state(elicited_metric=elicited, expert=expert)
    readonly = workspace_services.phase_refusal(study, workspace_services.Action.ELICIT)
    context = {
        "study": study,
        "study_tab": "elicitation",
        "elicited": elicited,
        "metric": elicited.metric,
        "state": state,
        "readonly": readonly,
        "percent": round(100 * len(state.answers) / (state.total + elicited_domain.CHECKS)),
        "steps": state.total + elicited_domain.CHECKS,
        "chart": _weights_chart("elicited-weights", state.result, "Your") if state.result is not None else None,
        # The pairs whose search stopped at the edge: a bound, and a ratio to type.
        "edge_pairs": [pair for pair in state.result.pairs if pair.bound] if state.result is not None else [],
    }
    return render(request, "evaluation/elicitation.html", context)
