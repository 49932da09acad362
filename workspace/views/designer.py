"""The designer's console: create or import a study, set it up (attributes,
metrics, candidates, thresholds), fill in the measurements, manage experts
and invitations, send reminders, read an expert's inputs.

Members other than the designer read the setup and the measurements;
every change is the designer's (403 for others, 404 for outsiders). Each
POST calls one service; a refusal is shown on the form it came from, with
nothing written.
"""

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.paginator import Page, Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import redirect, render
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from engine.rules import CONSISTENCY_THRESHOLD, is_consistent

from .. import invitations, limits, reminders, selectors, services
from ..api.throttling import import_refusal, import_throttle_wait
from ..bundles import copy_title, study_copy, study_export_json, study_import
from ..catalogue import ATTRIBUTE_CATALOGUE, catalogue_definition
from ..downloads import download
from ..errors import InvalidInput, ServiceError
from ..extensions import MEASUREMENT_SECTIONS, VALUE_SOURCES, candidate_removal_refusals
from ..forms import designer as f
from ..measurement_csv import CsvRefused, measurements_csv_text, measurements_parse, rows_as_measurements, text_decode
from ..models import Candidate, Membership, Metric, Phase, QualityAttribute, Study
from ..services import Action, phase_refusal
from .common import form_add_service_errors, require_designer, signed_in_user, study_for_member

# A new study's vote thresholds, as the form first shows them.
THRESHOLD_DEFAULTS = {
    "attribute_threshold": limits.ATTRIBUTE_THRESHOLD_DEFAULT,
    "metric_threshold": limits.METRIC_THRESHOLD_DEFAULT,
}

# Service fields that the forms split or name differently.
FORM_FIELD_OF = {"default_range": "least_acceptable"}


def service_errors(form: forms.Form, error: ServiceError) -> None:
    """A service's refusal on the form: field errors under their fields, a
    phase conflict above the form."""
    if isinstance(error, InvalidInput):
        renamed = {FORM_FIELD_OF.get(field, field): texts for field, texts in error.errors.items()}
        form_add_service_errors(form, InvalidInput(renamed))
    else:
        form.add_error(None, str(error))


def study_home(study: Study) -> str:
    return f"/studies/{study.pk}/"


# --- /studies/new/ -------------------------------------------------------------------------


@method_decorator(login_required, name="dispatch")
class StudyNewPage(View):
    """Create a study, start from a template (a copy of one the user
    designs), or import an ``approve-study/1`` bundle file."""

    # A bundle holds a whole study (limits.BodySizeLimitMiddleware reads this).
    max_body_bytes = limits.IMPORT_BODY_MAX_BYTES

    def render_page(
        self,
        create: forms.Form,
        upload: forms.Form,
        bundle_errors: Sequence[str] = (),
        import_refused: str = "",
        template: f.TemplateForm | None = None,
        status: int = 200,
    ) -> HttpResponse:
        context = {
            "create_form": create,
            "bundle_form": upload,
            "bundle_errors": bundle_errors,
            "import_refused": import_refused,
            "template_form": template or self.template_form(),
        }
        return render(self.request, "designer/study_new.html", context, status=status)

    def template_form(self, data: Any = None) -> f.TemplateForm:
        studies = selectors.studies_designed_by(user=signed_in_user(self.request))
        return f.TemplateForm(data, studies=studies, initial={"measurements": True})

    def get(self, request: HttpRequest) -> HttpResponse:
        return self.render_page(f.StudyForm(initial=THRESHOLD_DEFAULTS), f.BundleForm())

    def post(self, request: HttpRequest) -> HttpResponse:
        if request.POST.get("form") == "import":
            return self.post_import(request)
        if request.POST.get("form") == "template":
            return self.post_template(request)
        form = f.StudyForm(request.POST)
        if form.is_valid():
            try:
                study = services.study_create(designer=cast(User, request.user), **form.cleaned_data)
            except InvalidInput as error:
                form_add_service_errors(form, error)
            else:
                messages.success(
                    request, f"The study “{study.title}” was created. Set it up next: attributes, metrics, candidates."
                )
                return redirect(study_home(study))
        return self.render_page(form, f.BundleForm())

    def post_template(self, request: HttpRequest) -> HttpResponse:
        """A copy of the chosen study (one the user designs: the choices)."""
        form = self.template_form(request.POST)
        if form.is_valid():
            options = dict(form.cleaned_data)
            template = selectors.study_get(study_id=options.pop("template"), user=request.user)
            try:
                copy = study_copy(study=template, designer=signed_in_user(request), **options)
            except InvalidInput as error:
                form_add_service_errors(form, error)
            else:
                return _copied(request, template, copy, options)
        return self.render_page(f.StudyForm(initial=THRESHOLD_DEFAULTS), f.BundleForm(), template=form, status=400)

    def post_import(self, request: HttpRequest) -> HttpResponse:
        # The API's import throttle, one counter per user for both.
        wait = import_throttle_wait(request)
        if wait is not None:
            page = self.render_page(
                f.StudyForm(initial=THRESHOLD_DEFAULTS), f.BundleForm(), import_refused=import_refusal(wait)
            )
            page.status_code = 429
            page["Retry-After"] = str(math.ceil(wait))
            return page
        form = f.BundleForm(request.POST, request.FILES)
        bundle_errors = []
        if form.is_valid():
            try:
                limits.bundle_check_limits(form.cleaned_data["bundle"])
                imported = study_import(bundle=form.cleaned_data["bundle"], importer=cast(User, request.user))
            except InvalidInput as error:
                # Each problem at its place in the bundle: "metrics[2].default_range: ...".
                bundle_errors = [f"{path}: {message}" for path, msgs in error.errors.items() for message in msgs]
                form.add_error("bundle", "the bundle was refused and nothing was imported; see the problems listed")
            else:
                study = imported.study
                listed = invitations.invitation_list(study=study).order_by("id")  # in the bundle's order
                invited = [i.username for i in listed if i.username]
                notes = "".join(f" {note}" for note in imported.notes)
                note = f" Invited as experts (they join by accepting): {', '.join(invited)}." if invited else ""
                messages.success(request, f"The study “{study.title}” was imported.{notes}{note}")
                return redirect(study_home(study))
        return self.render_page(f.StudyForm(initial=THRESHOLD_DEFAULTS), form, bundle_errors)


# --- /studies/{id}/copy/ -----------------------------------------------------------------------


def _copied(request: HttpRequest, study: Study, copy: Study, options: Mapping[str, Any]) -> HttpResponse:
    """After a copy: say what came with it, and go to the copy's setup."""
    parts = ["its setup"]
    if options["measurements"]:
        parts.append("the measurements")
    if options["predictions"]:
        parts.append("the prediction sets")
    messages.success(
        request,
        f"The study “{copy.title}” was made from “{study.title}” with {' and '.join(parts)}, in the draft phase "
        "and without anyone's inputs. Invite the experts from its Experts tab.",
    )
    return redirect("study_setup", study_id=copy.pk)


@login_required
@require_http_methods(["GET", "POST"])
def study_copy_page(request: HttpRequest, study_id: int) -> HttpResponse:
    """Copy the study: GET says what is copied and what is not, POST copies
    it (``bundles.study_copy``) and goes to the copy's setup; a refusal is
    a 400 naming the field, nothing written."""
    study = _designer_study(request, study_id, "copy the study")
    data = request.POST if request.method == "POST" else None
    form = f.StudyCopyForm(data, initial={"title": copy_title(study.title), "measurements": True})
    if form.is_bound and form.is_valid():
        try:
            copy = study_copy(study=study, designer=signed_in_user(request), **form.cleaned_data)
        except InvalidInput as error:
            form_add_service_errors(form, error)
        else:
            return _copied(request, study, copy, form.cleaned_data)
    setup = selectors.study_setup_get(study=study)
    context = {
        "study": study,
        "study_tab": "home",
        "form": form,
        "setup": setup,
        "elicited": selectors.elicited_metric_names(study=study),
    }
    return render(request, "designer/study_copy.html", context, status=400 if form.errors else 200)


# --- /studies/{id}/setup/ ----------------------------------------------------------------------


def _metric_initial(metric: Metric) -> dict:
    least, desired = metric.default_range or (None, None)
    return {
        "attribute": metric.attribute_id,
        "name": metric.name,
        "better": metric.better,
        "unit": metric.unit,
        "least_acceptable": f.number_text(least),
        "desired": f.number_text(desired),
    }


SetupItem = QualityAttribute | Metric | Candidate


@dataclass(frozen=True)
class SetupKind:
    """One kind of setup item and the services that change it."""

    noun: str
    model: type[SetupItem]
    form: type[forms.Form]
    # The changes whose phases (services.PHASE_RULES) lock it.
    change: Action
    remove_action: Action
    add: Callable[..., Any]
    update: Callable[..., Any]
    remove: Callable[..., None]
    initial: Callable[[Any], dict]


def _metric_changes(cleaned: dict, attributes: dict[int, QualityAttribute]) -> dict:
    changes = {key: cleaned[key] for key in ("name", "better", "unit", "default_range")}
    return {**changes, "attribute": attributes[cleaned["attribute"]]}


KINDS = {
    "attributes": SetupKind(
        "attribute",
        QualityAttribute,
        f.AttributeForm,
        Action.CHANGE_ATTRIBUTE,
        Action.REMOVE_ATTRIBUTE,
        add=lambda study, data, **_: services.attribute_add(study=study, **data),
        update=lambda item, data, **_: services.attribute_update(attribute=item, **data),
        remove=lambda item: services.attribute_remove(attribute=item),
        initial=lambda a: {"name": a.name, "kind": a.kind, "description": a.description},
    ),
    "metrics": SetupKind(
        "metric",
        Metric,
        f.MetricForm,
        Action.CHANGE_METRIC,
        Action.REMOVE_METRIC,
        add=lambda study, data, attributes: services.metric_add(study=study, **_metric_changes(data, attributes)),
        update=lambda item, data, attributes: services.metric_update(metric=item, **_metric_changes(data, attributes)),
        remove=lambda item: services.metric_remove(metric=item),
        initial=_metric_initial,
    ),
    "candidates": SetupKind(
        "candidate",
        Candidate,
        f.CandidateForm,
        Action.CHANGE_CANDIDATES,
        Action.CHANGE_CANDIDATES,
        add=lambda study, data, **_: services.candidate_add(study=study, **data),
        update=lambda item, data, **_: services.candidate_update(candidate=item, **data),
        remove=lambda item: services.candidate_remove(candidate=item),
        initial=lambda c: {"name": c.name, "description": c.description},
    ),
}


def _kind(kind: str) -> SetupKind:
    if kind not in KINDS:
        raise Http404("No such part of the setup.")
    return KINDS[kind]


def _locks(study: Study) -> dict[str, str | None]:
    """Why each part of the setup is read-only now (the services' words), or None."""
    return {
        "attributes": phase_refusal(study, Action.CHANGE_ATTRIBUTE, "Changing attributes"),
        "metrics": phase_refusal(study, Action.CHANGE_METRIC, "Changing metrics"),
        "default_range": phase_refusal(study, Action.CHANGE_DEFAULT_RANGE, "Changing a metric's default range"),
        "thresholds": phase_refusal(study, Action.CHANGE_THRESHOLD),
        "weighting": phase_refusal(study, Action.CHANGE_ATTRIBUTE, "Changing the AHP weighting"),
    }


def _form_kwargs(kind: str, study: Study, attributes: list[QualityAttribute], locks: dict) -> dict:
    if kind != "metrics":
        return {}
    # After voting opens a metric keeps all but its default range.
    range_only = locks["metrics"] if locks["default_range"] is None else None
    return {"attributes": attributes, "range_only": range_only}


def _study_form(study: Study, data: Any = None) -> f.StudyForm:
    fields = ("title", "description", "attribute_threshold", "metric_threshold", "quorum", "ahp_weighting")
    initial = {name: getattr(study, name) for name in fields}
    locks = _locks(study)
    return f.StudyForm(
        data, initial=initial, thresholds_locked=locks["thresholds"], weighting_locked=locks["weighting"]
    )


def _kept_set(study: Study, candidates: list[Candidate]) -> None:
    """Sets each candidate's ``kept``: why it cannot be removed (the table
    says it instead of offering *Remove*), empty when it can. One query."""
    kept = candidate_removal_refusals(study=study) if candidates else {}
    for candidate in candidates:
        candidate.kept = "; ".join(kept.get(candidate.pk, ()))  # type: ignore[attr-defined]  # for the template


def _setup_page(request: HttpRequest, study: Study, **forms_given: forms.Form) -> HttpResponse:
    """The setup page; ``forms_given`` are bound forms to show with their errors."""
    attributes = list(selectors.attribute_list(study=study))
    metrics = list(selectors.metric_list(study=study))
    candidates = list(selectors.candidate_list(study=study))
    locks = _locks(study)
    for attribute in attributes:
        attribute.metric_names = [m.name for m in metrics if m.attribute_id == attribute.pk]
    for metric in metrics:
        least, desired = metric.default_range or (None, None)
        metric.range_text = (
            f"{f.number_text(least)} (least acceptable) to {f.number_text(desired)} (desired)"
            if metric.default_range
            else None
        )
    taken = {a.name for a in attributes}
    context = {
        "study": study,
        "study_tab": "setup",
        "locks": locks,
        "attributes": attributes,
        "metrics": metrics,
        "candidates": candidates,
        # A thousand candidates' rows, each with its actions, would be most of
        # the page: limits.CANDIDATES_PER_PAGE of them a page (?page=).
        "candidate_page": Paginator(candidates, limits.CANDIDATES_PER_PAGE).get_page(request.GET.get("page")),
        "catalogue": [entry for entry in ATTRIBUTE_CATALOGUE if entry.name not in taken],
        "catalogue_all": ATTRIBUTE_CATALOGUE,
    }
    if study.is_designer:
        _kept_set(study, candidates)
        context |= {
            "study_form": forms_given.get("details") or _study_form(study),
            "attribute_form": forms_given.get("attributes") or f.AttributeForm(),
            "catalogue_form": forms_given.get("catalogue"),
            "metric_form": forms_given.get("metrics")
            or f.MetricForm(attributes=attributes, initial={"better": "higher"}),
            "candidate_form": forms_given.get("candidates") or f.CandidateForm(),
        }
    return render(request, "designer/setup.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def setup_page(request: HttpRequest, study_id: int) -> HttpResponse:
    """The study's setup; a POST changes the title, description and thresholds."""
    study = study_for_member(request, study_id)
    if request.method == "GET":
        return _setup_page(request, study)
    require_designer(study, "change the study")
    form = _study_form(study, request.POST)
    if form.is_valid():
        try:
            services.study_update(study=study, **form.cleaned_data)
        except ServiceError as error:
            service_errors(form, error)
        else:
            messages.success(request, "The study's details were saved.")
            return redirect(f"/studies/{study.pk}/setup/#study")
    return _setup_page(request, study, details=form)


@login_required
@require_POST
def setup_item_add(request: HttpRequest, study_id: int, kind: str) -> HttpResponse:
    """Add an attribute (written, or picked from the catalogue), a metric or a candidate."""
    setup = _kind(kind)
    study = study_for_member(request, study_id)
    require_designer(study, f"add {setup.noun}s")
    attributes = list(selectors.attribute_list(study=study))
    form: forms.Form
    if kind == "attributes" and request.POST.get("form") == "catalogue":
        form = f.CatalogueAttributeForm(request.POST)
        given_as = "catalogue"
        if form.is_valid():
            form.cleaned_data["description"] = catalogue_definition(form.cleaned_data["name"])
    else:
        form = setup.form(request.POST, **_form_kwargs(kind, study, attributes, _locks(study)))
        given_as = kind
    if form.is_valid():
        try:
            item = setup.add(study, form.cleaned_data, attributes={a.pk: a for a in attributes})
        except ServiceError as error:
            service_errors(form, error)
        else:
            messages.success(request, f"The {setup.noun} “{item.name}” was added.")
            return redirect(f"/studies/{study.pk}/setup/#{kind}")
    return _setup_page(request, study, **{given_as: form})


def _item(study: Study, setup: SetupKind, pk: int) -> SetupItem:
    try:
        return selectors.setup_item_get(study=study, model=setup.model, pk=pk)
    except setup.model.DoesNotExist:
        raise Http404(f"No {setup.model._meta.object_name} matches the given query.") from None


@login_required
@require_http_methods(["GET", "POST"])
def setup_item_edit(request: HttpRequest, study_id: int, kind: str, pk: int) -> HttpResponse:
    setup = _kind(kind)
    study = study_for_member(request, study_id)
    require_designer(study, f"change {setup.noun}s")
    item = _item(study, setup, pk)
    attributes = list(selectors.attribute_list(study=study)) if kind == "metrics" else []
    locks = _locks(study)
    lock = phase_refusal(study, setup.change, f"Changing {setup.noun}s")
    if kind == "metrics" and locks["default_range"] is None:
        lock = None  # the default range still changes
    form_kwargs = _form_kwargs(kind, study, attributes, locks)
    form = setup.form(request.POST if request.method == "POST" else None, initial=setup.initial(item), **form_kwargs)
    if lock is not None:
        for field in form.fields.values():
            field.disabled = True
    if form.is_bound and lock is None and form.is_valid():
        try:
            if form_kwargs.get("range_only"):
                services.metric_update(metric=cast(Metric, item), default_range=form.cleaned_data["default_range"])
            else:
                setup.update(item, form.cleaned_data, attributes={a.pk: a for a in attributes})
        except ServiceError as error:
            service_errors(form, error)
        else:
            messages.success(request, f"The {setup.noun} “{item.name}” was saved.")
            return redirect(f"/studies/{study.pk}/setup/#{kind}")
    context = {
        "study": study,
        "study_tab": "setup",
        "form": form,
        "item": item,
        "setup": setup,
        "kind": kind,
        "lock": lock,
        "range_only": form_kwargs.get("range_only"),
    }
    return render(request, "designer/setup_item_edit.html", context)


def _removal_consequences(kind: str, item: SetupItem) -> list[str]:
    """What goes with the item, in words (two queries at most)."""
    values = selectors.measurements_of(item=item).count()
    if kind == "attributes":
        metrics = [
            m.name for m in selectors.metric_list(study=item.study).filter(attribute=cast(QualityAttribute, item))
        ]
        if not metrics:
            return ["It has no metrics."]
        return [
            f"Its {_plural(len(metrics), 'metric')} go with it: {', '.join(metrics)}.",
            f"{_plural(values, 'measured value')} of those metrics are deleted.",
        ]
    return [f"{_plural(values, 'measured value')} of this {KINDS[kind].noun} are deleted."]


def _kept(kind: str, item: SetupItem) -> str | None:
    """Why the item cannot be removed whatever the phase, or None: a
    candidate something keeps (``workspace.extensions.CANDIDATE_KEEPERS``,
    the rule ``services.candidate_remove`` refuses with). One query."""
    if kind != "candidates":
        return None
    reasons = candidate_removal_refusals(study=item.study, candidates=[item.pk]).get(item.pk)
    return "; ".join(reasons) if reasons else None


def _confirm(request: HttpRequest, context: dict, *, refused: bool) -> HttpResponse:
    """A confirmation page; 409 when the action it confirms was refused."""
    return render(request, "designer/confirm.html", context, status=409 if refused else 200)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


@login_required
@require_http_methods(["GET", "POST"])
def setup_item_remove(request: HttpRequest, study_id: int, kind: str, pk: int) -> HttpResponse:
    """GET: what removing the item deletes, and a button; POST: remove it."""
    setup = _kind(kind)
    study = study_for_member(request, study_id)
    require_designer(study, f"remove {setup.noun}s")
    item = _item(study, setup, pk)
    refusal = phase_refusal(study, setup.remove_action, f"Removing {setup.noun}s")
    kept = _kept(kind, item) if refusal is None else None
    if kept:
        # Said before any confirmation (the service refuses it the same way).
        refusal = f"{item.name} can't be removed: {kept}."
    if request.method == "POST" and refusal is None:
        try:
            setup.remove(item)
        except ServiceError as error:
            refusal = str(error)
        else:
            messages.success(request, f"The {setup.noun} “{item.name}” was removed.")
            return redirect(f"/studies/{study.pk}/setup/#{kind}")
    context = {
        "study": study,
        "study_tab": "setup",
        "title": f"The {setup.noun} “{item.name}” can't be removed"
        if kept
        else f"Remove the {setup.noun} “{item.name}”?",
        "consequences": _removal_consequences(kind, item) if refusal is None else [],
        "refusal": refusal,
        "button": f"Remove {setup.noun}",
        "cancel": f"/studies/{study.pk}/setup/#{kind}",
    }
    return _confirm(request, context, refused=bool(refusal) and request.method == "POST")


# --- /studies/{id}/measurements/ ------------------------------------------------------------------


@dataclass(frozen=True)
class MeasurementPage:
    """One page of the measurements table (limits.CANDIDATES_PER_PAGE
    candidates): the study's candidates and metrics, the page, and the values
    it shows. Five queries: candidates, metrics with how many are measured,
    the values shown (evaluation.selectors.measurement_values_shown), where
    and each of the sources registered (workspace.extensions.VALUE_SOURCES:
    computed from predictions, imported from MLflow) by (candidate id,
    metric id)."""

    candidates: list[Candidate]
    metrics: list[Metric]
    page: Page
    values: dict[tuple[int, int], float]
    sources: dict[str, dict[tuple[int, int], Any]]  # by ValueSources.key
    standard_errors: dict[tuple[int, int], float]

    @classmethod
    def read(cls, study: Study, number: str | None) -> "MeasurementPage":
        candidates = list(selectors.candidate_list(study=study))
        metrics = list(selectors.metric_list(study=study, measured=True))
        page = Paginator(candidates, limits.CANDIDATES_PER_PAGE).get_page(number)
        ids = [c.pk for c in page.object_list]
        also = [source.also_shown(study=study) for source in VALUE_SOURCES if source.also_shown is not None]
        values, errors = selectors.measurement_values_shown(study=study, candidate_ids=ids, also=also)
        sources = {source.key: source.read(study=study) for source in VALUE_SOURCES}
        return cls(candidates, metrics, page, values, sources, errors)

    @property
    def shown(self) -> list[Candidate]:
        return list(self.page.object_list)

    def table_form(self, data: Any = None) -> f.MeasurementTableForm:
        """The cells of this page's candidates, one field each."""
        return f.MeasurementTableForm(data, candidates=self.shown, metrics=self.metrics, values=self.values)

    @property
    def url(self) -> str:
        return f"?page={self.page.number}" if self.page.number > 1 else ""


def _measurement_page(
    request: HttpRequest,
    study: Study,
    *,
    read: MeasurementPage | None = None,
    table: forms.Form | None = None,
    upload: forms.Form | None = None,
    csv_errors: Sequence[str] = (),
) -> HttpResponse:
    read = read or MeasurementPage.read(study, request.GET.get("page"))
    candidates, metrics = read.candidates, read.metrics
    cells = len(candidates) * len(metrics)
    too_big, editable, errors, posted = _measurement_table_state(study, read, table)
    rows = [
        {"candidate": c, "cells": [_measurement_cell(read, c, m, editable, posted, errors) for m in metrics]}
        for c in read.shown
    ]
    shown_names = {c.name for c in read.shown}
    measured = sum(cast(Any, m).measured_count for m in metrics)  # metric_list(measured=True)
    context = {
        "study": study,
        "study_tab": "measurements",
        "candidates": candidates,
        "metrics": metrics,
        "rows": rows,
        "page": read.page,
        "page_url": read.url,
        "editable": editable,
        "table_form": table if editable else None,
        "cell_max_length": limits.UNIT_MAX_LENGTH,
        "too_big": study.is_designer and too_big,
        "cells": cells,
        "measured": measured,
        "missing": cells - measured,
        "csv_form": (upload or f.MeasurementCsvForm()) if study.is_designer else None,
        "csv_errors": csv_errors,
        "max_rows": limits.MEASUREMENTS_PER_PUT_MAX,
        **_source_summaries(read),
        # Elicited metrics: each candidate's spread across the experts (once
        # closed), for the candidates of this page, as the table shows them.
        "spread_min_experts": limits.ROUND_FEEDBACK_MIN_EXPERTS,
        **{
            key: read_section(study=study, candidates=shown_names) for key, read_section in MEASUREMENT_SECTIONS.items()
        },
    }
    return render(request, "designer/measurements.html", context)


def _measurement_table_state(
    study: Study, read: MeasurementPage, table: forms.Form | None
) -> tuple[bool, bool, Mapping[str, Any], Mapping[str, Any] | None]:
    """(too big to edit in the page?, editable?, the posted table's errors,
    the posted data or None): whether this page's table is a form, and what
    was posted to it."""
    shown_cells = len(read.shown) * len(read.metrics)
    # A form body holds at most limits.FORM_MAX_FIELDS fields (Django's own
    # limit, the CSRF token included); a page wider than that is edited
    # through CSV.
    too_big = shown_cells >= limits.FORM_MAX_FIELDS - 10
    editable = study.is_designer and shown_cells > 0 and not too_big
    # The table's form is built only for what was posted: a page shown
    # afresh writes its 500 inputs from the values, with nothing to check.
    errors = table.errors if editable and table is not None else {}
    posted = table.data if editable and table is not None and table.is_bound else None
    return too_big, editable, errors, posted


def _measurement_cell(
    read: MeasurementPage,
    candidate: Candidate,
    metric: Metric,
    editable: bool,
    posted: Mapping[str, Any] | None,
    errors: Mapping[str, Any],
) -> dict:
    """A cell, and when editable its input as plain data: the template
    writes 500 inputs a page, which Django's widget rendering would
    make the page's main cost."""
    value = read.values.get((candidate.pk, metric.pk))
    entry: dict[str, Any] = {
        "metric": metric,
        "value": value,
        "standard_error": read.standard_errors.get((candidate.pk, metric.pk)),
        "input": None,
    }
    for kind in VALUE_SOURCES:  # "computed", "imported": the source if it still holds the value
        source = read.sources[kind.key].get((candidate.pk, metric.pk))
        entry[kind.key] = source if source is not None and kind.holds(source, value) else None
    if editable:
        name = f.cell_name(candidate.pk, metric.pk)
        entry["input"] = {
            "name": name,
            "label": f"{metric.name} of {candidate.name}",
            "text": posted.get(name, "") if posted is not None else f.number_text(value),
            "errors": errors.get(name),
        }
    return entry


def _source_summaries(read: MeasurementPage) -> dict[str, list]:
    """Each registered source's summary of the page's metrics, under its
    ``summaries_key`` ("provenance", "mlflow_provenance")."""
    names = {c.pk: c.name for c in read.candidates}
    return {
        kind.summaries_key: kind.summaries(
            metrics=read.metrics, sources=read.sources[kind.key], values=read.values, candidate_names=names
        )
        for kind in VALUE_SOURCES
    }


@login_required
@require_http_methods(["GET", "POST"])
def measurements_page(request: HttpRequest, study_id: int) -> HttpResponse:
    """The candidate × metric table, limits.CANDIDATES_PER_PAGE candidates a
    page (``?page=``; all of them in ``measurements.csv``); a POST saves the
    edited cells of its page, all or nothing."""
    study = study_for_member(request, study_id)
    if request.method == "GET":
        return _measurement_page(request, study)
    require_designer(study, "change measurements")
    read = MeasurementPage.read(study, request.GET.get("page"))
    form = read.table_form(request.POST)
    if form.is_valid():
        changed = form.cleaned_data["measurements"]
        try:
            services.measurements_set(study=study, measurements=changed)
        except ServiceError as error:
            service_errors(form, error)
        else:
            messages.success(request, f"{_plural(len(changed), 'value')} saved." if changed else "Nothing changed.")
            return redirect(f"/studies/{study.pk}/measurements/{read.url}")
    return _measurement_page(request, study, read=read, table=form)


@login_required
@require_GET
def measurements_csv_download(request: HttpRequest, study_id: int) -> HttpResponseBase:
    """Every measurement of the study as the wide CSV the upload reads back
    (one row per candidate, one column per metric, numbers at full
    precision): the measurements page's *Show all*."""
    study = study_for_member(request, study_id)
    text = measurements_csv_text(
        candidates=[c.name for c in selectors.candidate_list(study=study)],
        metrics=[m.name for m in selectors.metric_list(study=study)],
        rows=selectors.measurement_list(study=study),
    )
    return download(text.encode(), "text/csv; charset=utf-8", filename=f"approve-study-{study.pk}-measurements.csv")


@login_required
@require_POST
def measurements_csv(request: HttpRequest, study_id: int) -> HttpResponse:
    """Paste or upload CSV (long or wide); all or nothing, errors by line."""
    study = study_for_member(request, study_id)
    require_designer(study, "change measurements")
    form = f.MeasurementCsvForm(request.POST, request.FILES)
    csv_errors: list[str] = []
    if form.is_valid():
        try:
            upload = form.cleaned_data["csv_file"]
            text = text_decode(upload.read()) if upload else form.cleaned_data["csv_text"]
            rows = measurements_parse(
                text,
                candidates={c.name for c in selectors.candidate_list(study=study)},
                metrics={m.name for m in selectors.metric_list(study=study)},
                max_rows=limits.MEASUREMENTS_PER_PUT_MAX,
            )
            services.measurements_set(study=study, measurements=rows_as_measurements(rows))
        except CsvRefused as refused:
            csv_errors = refused.errors
        except InvalidInput as error:
            # The parser checked names and numbers; what the service still
            # refuses is reported at the row it came from.
            csv_errors = [f"{path}: {', '.join(msgs)}" for path, msgs in error.errors.items()]
        else:
            messages.success(request, f"{_plural(len(rows), 'measured value')} saved from the CSV.")
            return redirect(f"/studies/{study.pk}/measurements/")
        field = "csv_file" if form.cleaned_data.get("csv_file") else "csv_text"
        form.add_error(field, f"refused: {_plural(len(csv_errors), 'problem')}, listed above")
    return _measurement_page(request, study, upload=form, csv_errors=csv_errors)


# --- /studies/{id}/bundle.json ----------------------------------------------------------------


@login_required
@require_GET
def study_bundle_download(request: HttpRequest, study_id: int) -> HttpResponseBase:
    """The study as an ``approve-study/1`` file: the bytes the API's export
    gives, for the import page (or another approve) to read back."""
    study = _designer_study(request, study_id, "download the study's bundle")
    return download(study_export_json(study=study), "application/json", filename=f"approve-study-{study.pk}.json")


# --- /studies/{id}/experts/ ------------------------------------------------------------------------


def _experts_page(
    request: HttpRequest,
    study: Study,
    *,
    invite: forms.Form | None = None,
    invite_email: forms.Form | None = None,
    remind: forms.Form | None = None,
    new_link: str | None = None,
    link_error: str | None = None,
    sent: reminders.ReminderReport | None = None,
) -> HttpResponse:
    members = list(selectors.member_list(study=study))
    experts = [m for m in members if m.role == Membership.Role.EXPERT]
    # an absent expert is not reminded: they owe nothing
    active = [m for m in experts if m.status == Membership.Status.ACTIVE and not m.absence]
    _experts_inputs_annotate(study, experts)
    context = {
        "study": study,
        "study_tab": "experts",
        "designer_member": next((m for m in members if m.role == Membership.Role.DESIGNER), None),
        "experts": experts,
        "invitations": list(invitations.invitation_list(study=study)),
        "invite_form": invite or f.InviteForm(),
        "invite_email_form": invite_email or f.InviteEmailForm(),
        "remind_form": remind or f.ReminderForm(experts=active),
        "has_active": bool(active),
        "invite_lock": phase_refusal(study, Action.INVITE_EXPERT),
        "remove_lock": phase_refusal(study, Action.REMOVE_EXPERT),
        "exclude_lock": phase_refusal(study, Action.EXCLUDE_EXPERT),
        "reminder_link": request.build_absolute_uri(study_home(study)),
        "new_link": new_link,
        "link_error": link_error,
        "sent": sent,
        "assessment": study.phase == Phase.ASSESSMENT,
        "invitation_days": settings.INVITATION_LIFETIME_DAYS,
    }
    response = render(request, "designer/experts.html", context)
    if new_link:
        # The key is shown once: not in a cache, not in the browser's history.
        response["Cache-Control"] = "no-store"
    return response


def _experts_inputs_annotate(study: Study, experts: list[Membership]) -> None:
    """Sets each expert's ``missing`` (the inputs still to give, None when
    the phase takes none) and ``notes`` (what does not block closing but a
    reminder asks about, issue 16)."""
    assessing = services.phase_allows(study, services.Action.PRIORITISE)  # inputs are being given
    missing = selectors.missing_input_list(study=study) if assessing else None
    for expert in experts:
        expert.missing = None if missing is None else missing.get(expert.user.get_username(), [])
    notes = selectors.input_note_list(study=study) if assessing else {}
    for expert in experts:
        found = notes.get(expert.user.get_username(), {})
        expert.notes = [selectors.note_words(note, value, to_expert=False) for note, value in found.items()]


def _designer_study(request: HttpRequest, study_id: int, action: str) -> Study:
    study = study_for_member(request, study_id)
    require_designer(study, action)
    return study


@login_required
def experts_page(request: HttpRequest, study_id: int) -> HttpResponse:
    study = _designer_study(request, study_id, "manage the experts")
    return _experts_page(request, study)


@login_required
@require_POST
def expert_invite(request: HttpRequest, study_id: int) -> HttpResponse:
    """Invite by username: the same answer whether or not the account exists."""
    study = _designer_study(request, study_id, "invite experts")
    form = f.InviteForm(request.POST)
    if form.is_valid():
        try:
            added = invitations.member_add(study=study, added_by=request.user, username=form.cleaned_data["username"])
        except ServiceError as error:
            service_errors(form, error)
        else:
            if isinstance(added, Membership):
                unreachable = "" if added.user.email else " You have no e-mail address: reminders can't reach you."
                messages.success(request, f"You are now an expert of this study too.{unreachable}")
            else:
                # The same words whether or not the account exists, or has an address.
                messages.success(
                    request,
                    f"{added.username} is invited: the invitation waits for “{added.username}” to sign in and "
                    "accept; if no account has that name yet, it waits until one is created. Check the spelling "
                    "below: a mistyped name can be revoked. Once they accept, the experts' list shows their "
                    "e-mail address, or that they have none and reminders can't reach them.",
                )
            return redirect(f"/studies/{study.pk}/experts/")
    return _experts_page(request, study, invite=form)


@login_required
@require_POST
def expert_invite_email(request: HttpRequest, study_id: int) -> HttpResponse:
    """Invite by e-mail address: a link mailed to it (the key is never shown)."""
    study = _designer_study(request, study_id, "invite experts")
    form = f.InviteEmailForm(request.POST)
    if form.is_valid():
        try:
            invitation, _key = invitations.invitation_create(
                study=study, created_by=request.user, email=form.cleaned_data["email"]
            )
        except ServiceError as error:
            service_errors(form, error)
        else:
            messages.success(
                request,
                f"An invitation link is being mailed to {invitation.email}. Whoever opens it joins as an expert "
                f"(once; it expires in {settings.INVITATION_LIFETIME_DAYS} days); an account that confirmed this "
                "address sees the invitation on its studies page too.",
            )
            return redirect(f"/studies/{study.pk}/experts/")
    return _experts_page(request, study, invite_email=form)


@login_required
@require_POST
def invitation_link_create(request: HttpRequest, study_id: int) -> HttpResponse:
    """A link invitation: the page shows its address this once."""
    study = _designer_study(request, study_id, "invite experts")
    try:
        _invitation, key = invitations.invitation_create(study=study, created_by=request.user)
    except ServiceError as error:
        return _experts_page(request, study, link_error=str(error))
    return _experts_page(request, study, new_link=request.build_absolute_uri(f"/invitations/{key}/"))


@login_required
@require_http_methods(["GET", "POST"])
def invitation_revoke(request: HttpRequest, study_id: int, pk: int) -> HttpResponse:
    study = _designer_study(request, study_id, "revoke invitations")
    invitation = invitations.invitation_list(study=study).filter(pk=pk).first()
    if invitation is None:
        raise Http404("No such invitation.")
    who = invitation.username or invitation.email
    label = f"invitation of {who}" if who else "invitation link"
    refusal = None
    if request.method == "POST":
        try:
            invitations.invitation_revoke(invitation=invitation)
        except ServiceError as error:
            refusal = str(error)
        else:
            messages.success(request, f"The {label} was revoked.")
            return redirect(f"/studies/{study.pk}/experts/")
    consequences = [
        "The link stops working: whoever opens it is told it was revoked."
        if invitation.is_link
        else f"“{invitation.username}” can no longer accept it.",
        "You can invite again afterwards (the right username, if this one was mistyped).",
    ]
    context = {
        "study": study,
        "study_tab": "experts",
        "title": f"Revoke the {label}?",
        "consequences": consequences,
        "refusal": refusal,
        "button": "Revoke invitation",
        "cancel": f"/studies/{study.pk}/experts/",
    }
    return _confirm(request, context, refused=bool(refusal))


@login_required
@require_http_methods(["GET", "POST"])
def expert_remove(request: HttpRequest, study_id: int, username: str) -> HttpResponse:
    """GET: what removing the expert deletes; POST: remove them."""
    study = _designer_study(request, study_id, "remove experts")
    try:
        membership = selectors.expert_get(study=study, username=username)
    except Membership.DoesNotExist:
        raise Http404("No such expert.") from None
    refusal = phase_refusal(study, Action.REMOVE_EXPERT)
    if request.method == "POST" and refusal is None:
        try:
            services.expert_remove(study=study, user=membership.user)
        except ServiceError as error:
            refusal = str(error)
        else:
            messages.success(request, f"{username} is no longer an expert of this study; their inputs were deleted.")
            return redirect(f"/studies/{study.pk}/experts/")
    consequences = [
        f"{username} no longer sees this study (unless they have another role in it).",
        "Everything they entered goes with them: their votes, priorities, acceptable ranges and peer weights, and "
        "the weights other experts gave them.",
        "This cannot be undone; you can invite them again while the study is in draft.",
    ]
    context = {
        "study": study,
        "study_tab": "experts",
        "title": f"Remove the expert {username}?",
        "consequences": consequences if refusal is None else [],
        "refusal": refusal,
        "button": "Remove expert",
        "cancel": f"/studies/{study.pk}/experts/",
    }
    return _confirm(request, context, refused=bool(refusal) and request.method == "POST")


def _expert_of(study: Study, username: str) -> Membership:
    try:
        return selectors.expert_get(study=study, username=username)
    except Membership.DoesNotExist:
        raise Http404("No such expert.") from None


@login_required
@require_http_methods(["GET", "POST"])
def expert_exclude(request: HttpRequest, study_id: int, username: str) -> HttpResponse:
    """GET: how excluding the expert works, with the form (how, why); POST:
    exclude them or mark them abstaining (``services.expert_absence_set``)."""
    study = _designer_study(request, study_id, "exclude experts")
    membership = _expert_of(study, username)
    refusal = phase_refusal(study, Action.EXCLUDE_EXPERT)
    form = f.AbsenceForm(request.POST or None, initial={"absence": membership.absence or "excluded"})
    if request.method == "POST" and refusal is None and form.is_valid():
        try:
            services.expert_absence_set(
                study=study,
                expert=membership,
                absence=form.cleaned_data["absence"],
                reason=form.cleaned_data["reason"],
                acting=signed_in_user(request),
            )
        except InvalidInput as error:
            form_add_service_errors(form, error)
        except ServiceError as error:
            refusal = str(error)
        else:
            word = "is excluded" if form.cleaned_data["absence"] == "excluded" else "abstains"
            messages.success(
                request,
                f"{username} {word}: their inputs are kept but not used; you can re-admit them until the study closes.",
            )
            return redirect(f"/studies/{study.pk}/experts/")
    context = {
        "study": study,
        "study_tab": "experts",
        "expert": membership,
        "form": form,
        "refusal": refusal,
        "taking_part": selectors.panel_list(study=study).exclude(pk=membership.pk).count(),
    }
    status = 409 if refusal and request.method == "POST" else 400 if form.errors else 200
    return render(request, "designer/expert_exclude.html", context, status=status)


@login_required
@require_POST
def expert_readmit(request: HttpRequest, study_id: int, username: str) -> HttpResponse:
    """Let an excluded or abstaining expert take part again."""
    study = _designer_study(request, study_id, "re-admit experts")
    membership = _expert_of(study, username)
    try:
        services.expert_readmit(study=study, expert=membership, acting=signed_in_user(request))
    except ServiceError as error:
        messages.error(request, str(error))
    else:
        messages.success(request, f"{username} takes part again: their inputs count again.")
    return redirect(f"/studies/{study.pk}/experts/")


@login_required
@require_POST
def reminders_send(request: HttpRequest, study_id: int) -> HttpResponse:
    """E-mail a reminder to the chosen active experts; the page says who got it."""
    study = _designer_study(request, study_id, "send reminders")
    active = [m for m in selectors.panel_list(study=study) if m.status == Membership.Status.ACTIVE]
    form = f.ReminderForm(request.POST, experts=active)
    if not form.is_valid():
        return _experts_page(request, study, remind=form)
    chosen = set(form.cleaned_data["experts"])
    report = reminders.reminders_send(
        study=study,
        experts=[m for m in active if m.user.get_username() in chosen],
        link=request.build_absolute_uri(study_home(study)),
        note=form.cleaned_data["note"],
    )
    return _experts_page(request, study, sent=report)


# --- /studies/{id}/inputs/{username}/ ---------------------------------------------------------------


def _weights_rows(section: dict, result: dict | None) -> list[dict]:
    """Items with what the expert gave and the weight that resulted."""
    weights = (result or {}).get("weights", {})
    given = section.get("weights") or {}
    return [{"name": name, "given": given.get(name), "weight": weight} for name, weight in weights.items()]


def _prioritisation_view(section: dict, result: dict | None) -> dict:
    ratio = (result or {}).get("consistency_ratio")
    return {
        "method": section["method"],
        "rows": _weights_rows(section, result),
        "judgments": section.get("judgments", []),
        "ratio": ratio,
        "consistent": None if ratio is None else is_consistent(ratio),
        "most_inconsistent": (result or {}).get("most_inconsistent", []),
    }


@login_required
def expert_inputs_page(request: HttpRequest, study_id: int, username: str) -> HttpResponse:
    """One expert's inputs, read-only, as they are saved."""
    study = _designer_study(request, study_id, "read other experts' inputs")
    try:
        membership = selectors.expert_get(study=study, username=username)
    except Membership.DoesNotExist:
        raise Http404("No such expert.") from None
    inputs = selectors.expert_inputs_list(study=study, experts=[membership], with_results=True)[username]
    priorities = inputs["priorities"]
    context = {
        "study": study,
        "study_tab": "experts",
        "expert": membership,
        "inputs": inputs,
        "priorities": None if priorities is None else _prioritisation_view(priorities, priorities.get("result")),
        "local": []
        if priorities is None
        else [
            {"attribute": name, **_prioritisation_view(section, priorities.get("metric_results", {}).get(name))}
            for name, section in priorities.get("metric_priorities", {}).items()
        ],
        "pending": membership.status == Membership.Status.PENDING,
        "consistency_threshold": CONSISTENCY_THRESHOLD,
        "peers": [(name, f"{weight * 100:.1f}".removesuffix(".0")) for name, weight in inputs["peer_weights"].items()],
    }
    return render(request, "designer/inputs.html", context)


__all__ = [
    "StudyNewPage",
    "expert_inputs_page",
    "expert_invite",
    "expert_remove",
    "experts_page",
    "invitation_link_create",
    "invitation_revoke",
    "measurements_csv",
    "measurements_csv_download",
    "measurements_page",
    "reminders_send",
    "setup_item_add",
    "setup_item_edit",
    "setup_item_remove",
    "setup_page",
    "study_bundle_download",
]
