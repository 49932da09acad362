"""The administration site: a direct view of every row, for support staff.

Designers and experts work through the pages and the API, whose services
check the domain rules. The admin is the superuser's tool for looking and
repairing, so it keeps to three habits:

- phase changes go through the application (they have entry conditions), so
  ``Study.phase`` and computed fields are read-only here;
- every list and inline selects or prefetches what it shows, so a page costs
  the same number of queries however many rows it lists;
- choices in inlines are limited to the parent's study and fetched once per
  page rather than once per row.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict, cast

from django import forms
from django.contrib import admin
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.forms import AdminUserCreationForm, UserChangeForm
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count, ForeignKey, Model, OuterRef, QuerySet
from django.forms.models import BaseInlineFormSet, ModelChoiceField, ModelChoiceIterator
from django.http import HttpRequest

from .admin_lists import HistorySourceFilter, SiteSizeAdmin
from .history import KINDS
from .models import (
    AcceptableRange,
    ApiToken,
    AttributeJudgment,
    AttributePrioritisation,
    AttributeVote,
    AttributeWeight,
    Candidate,
    Measurement,
    Membership,
    Metric,
    MetricJudgment,
    MetricPrioritisation,
    MetricVote,
    MetricWeight,
    PeerWeight,
    QualityAttribute,
    Study,
    StudyDeletion,
)
from .selectors._queries import count_of
from .services import Action, inputs_changed, phase_allows
from .services.accounts import USERNAME_TAKEN, usernames_taken

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class ExpertCount(TypedDict):
    _expert_count: int


class MetricCount(TypedDict):
    _metric_count: int


class MeasurementCount(TypedDict):
    _measurement_count: int


# The rows of one expert's membership, and the rows of one prioritisation.
ExpertInput = AttributeVote | MetricVote | AttributePrioritisation | MetricPrioritisation | AcceptableRange
PrioritisationRow = AttributeJudgment | AttributeWeight | MetricJudgment | MetricWeight

# --- shared helpers -------------------------------------------------------------


def _membership_queryset() -> QuerySet[Membership]:
    # Membership.__str__ names the user and the study: fetch both with it.
    return Membership.objects.select_related("user", "study")


if TYPE_CHECKING:
    _AdminBase = admin.options.BaseModelAdmin[Any]
else:
    _AdminBase = object


class MembershipChoicesMixin(_AdminBase):
    """Foreign keys to Membership list their user and study without a query
    per option."""

    def formfield_for_foreignkey(
        self, db_field: ForeignKey[Any, Any], request: HttpRequest, **kwargs: Any
    ) -> "ModelChoiceField[Any] | None":
        if db_field.related_model is Membership and "queryset" not in kwargs:
            kwargs["queryset"] = _membership_queryset()
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class StudyScopedInline(MembershipChoicesMixin, admin.TabularInline):
    """An inline whose foreign keys offer only rows of the parent's study.

    ``scoped_choices`` maps a field name to a function of the parent object
    returning the queryset of allowed choices. The choices are evaluated once
    when the formset class is built, so N rows cost one query, not N.
    """

    scoped_choices: dict[str, Callable[[Any], QuerySet[Any]]] = {}
    extra = 0

    def get_formset(
        self, request: HttpRequest, obj: Model | None = None, **kwargs: Any
    ) -> "type[BaseInlineFormSet[Any, Any, Any]]":
        # ModelAdmin instances are shared between requests: keep the parent on
        # the request, which formfield_for_foreignkey also receives.
        request._approve_admin_parent = obj  # type: ignore[attr-defined]  # this admin's own attribute
        return super().get_formset(request, obj, **kwargs)

    def formfield_for_foreignkey(
        self, db_field: ForeignKey[Any, Any], request: HttpRequest, **kwargs: Any
    ) -> "ModelChoiceField[Any] | None":
        scope = self.scoped_choices.get(db_field.name)
        if scope is None:
            return super().formfield_for_foreignkey(db_field, request, **kwargs)
        parent = getattr(request, "_approve_admin_parent", None)
        kwargs["queryset"] = scope(parent) if parent is not None else db_field.related_model._default_manager.none()
        formfield = super().formfield_for_foreignkey(db_field, request, **kwargs)
        if formfield is not None:
            # A ModelChoiceField's choices are its ModelChoiceIterator (a query each time it is read).
            formfield.choices = list(cast("ModelChoiceIterator[Any]", formfield.choices))
        return formfield


# --- what a run's snapshot reads --------------------------------------------------


class InputsAdmin(_AdminBase):
    """The admin of a model a run's snapshot may read (engine.snapshot): every
    save, deletion and inline change here bumps the ``input_version`` of the
    studies it touches (``services.inputs_changed``), as the services do
    through their row lock, so the next launch takes a new snapshot.
    ``study_path`` leads from the model to its study (its id).

    The studies are bumped before the write too: the bump locks their rows,
    so no service nor launch interleaves until the admin's change commits, and
    a study saved here whole writes the version it has just read."""

    study_path: ClassVar[str] = "study"

    def studies_of(self, pks: list[Any]) -> list[int]:
        pks = [pk for pk in pks if pk is not None]
        if not pks:
            return []
        found = self.model._default_manager.filter(pk__in=pks).values_list(self.study_path, flat=True)
        return [pk for pk in found if pk is not None]

    def _bump(self, pks: list[Any]) -> None:
        studies = self.studies_of(pks)
        if studies:
            inputs_changed(studies=studies)

    def save_model(self, request: HttpRequest, obj: Model, form: "forms.ModelForm[Any]", change: bool) -> None:
        self._bump([obj.pk])
        if isinstance(obj, Study) and obj.pk is not None:
            obj.input_version = Study.objects.values_list("input_version", flat=True).get(pk=obj.pk)
        super().save_model(request, obj, form, change)  # type: ignore[misc]  # a ModelAdmin's at run time
        self._bump([obj.pk])

    def delete_model(self, request: HttpRequest, obj: Model) -> None:
        self._bump([obj.pk])
        super().delete_model(request, obj)  # type: ignore[misc]  # the mixin's super() is the ModelAdmin it is mixed into

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        with transaction.atomic():
            self._bump(list(queryset.values_list("pk", flat=True)))
            super().delete_queryset(request, queryset)  # type: ignore[misc]  # the mixin's super() is the ModelAdmin it is mixed into

    def save_formset(
        self,
        request: HttpRequest,
        form: "forms.ModelForm[Any]",
        formset: "BaseInlineFormSet[Any, Any, Any]",
        change: bool,
    ) -> None:
        self._bump([form.instance.pk])
        super().save_formset(request, form, formset, change)  # type: ignore[misc]  # the mixin's super() is the ModelAdmin it is mixed into


# --- the study ------------------------------------------------------------------


class MembershipInline(MembershipChoicesMixin, admin.TabularInline):
    model = Membership
    extra = 0
    fields = ("user", "role", "created_at")
    readonly_fields = ("created_at",)
    autocomplete_fields = ("user",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Membership]:
        return super().get_queryset(request).select_related("user")


class QualityAttributeInline(admin.TabularInline):
    model = QualityAttribute
    extra = 0
    fields = ("position", "name", "kind", "is_selected", "description")
    show_change_link = True


class CandidateInline(admin.TabularInline):
    model = Candidate
    extra = 0
    fields = ("position", "name", "description")
    show_change_link = True


@admin.register(Study)
class StudyAdmin(InputsAdmin, SiteSizeAdmin, admin.ModelAdmin):
    study_path = "pk"
    list_display = ("title", "phase", "designer", "expert_count", "created_at", "updated_at")
    # By date with the date filter, not date_hierarchy (a scan of every study: workspace.admin_lists).
    list_filter = ("phase", "created_at")
    list_select_related = ("designer",)
    search_fields = ("title", "description", "designer__username", "designer__email")
    autocomplete_fields = ("designer",)
    readonly_fields = ("phase", "created_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("title", "description", "designer", "phase")}),
        ("Vote thresholds", {"fields": ("attribute_threshold", "metric_threshold")}),
        ("History", {"fields": ("created_at", "updated_at"), "classes": ("collapse",)}),
    )
    inlines = (MembershipInline, QualityAttributeInline, CandidateInline)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Study]:
        return (
            super()
            .get_queryset(request)
            # A subquery per row shown, not a join of every membership (which the count would group).
            .annotate(
                _expert_count=count_of(Membership.objects.filter(study=OuterRef("pk"), role=Membership.Role.EXPERT))
            )
        )

    def get_readonly_fields(self, request: HttpRequest, obj: Study | None = None) -> tuple[str, ...]:
        # The designer's membership row must follow the study's designer;
        # changing one without the other would hide the study from its designer.
        if obj is None:
            return self.readonly_fields
        fixed: tuple[str, ...] = (*self.readonly_fields, "designer")
        # Thresholds decide the selection when voting closes; afterwards a
        # change would contradict the selection already made.
        if not phase_allows(obj, Action.CHANGE_THRESHOLD):
            fixed += ("attribute_threshold", "metric_threshold")
        return fixed

    @admin.display(description="Experts", ordering="_expert_count")
    def expert_count(self, obj: "WithAnnotations[Study, ExpertCount]") -> int:
        return obj._expert_count

    def save_related(
        self,
        request: HttpRequest,
        form: "forms.ModelForm[Study]",
        formsets: "list[BaseInlineFormSet[Any, Study, Any]]",
        change: bool,
    ) -> None:
        super().save_related(request, form, formsets, change)
        # A study is visible through memberships, so a study added here needs
        # its designer's row (the application's study_create makes it too).
        study = form.instance
        if not study.memberships.filter(role=Membership.Role.DESIGNER).exists():
            Membership.objects.create(study=study, user=study.designer, role=Membership.Role.DESIGNER)


@admin.register(Membership)
class MembershipAdmin(InputsAdmin, SiteSizeAdmin, admin.ModelAdmin):
    list_display = ("user", "role", "study", "study_phase", "created_at")
    # By the study's id (newest first), not Meta's "study", which sorts by the
    # study's own ordering: every membership joined to its study, then sorted.
    ordering = ("-study_id", "role", "id")
    list_filter = ("role", "study__phase")
    list_select_related = ("user", "study")
    search_fields = ("user__username", "user__email", "study__title")
    autocomplete_fields = ("user", "study")
    readonly_fields = ("created_at",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Membership]:
        # Also used by the autocomplete of every foreign key to Membership.
        return super().get_queryset(request).select_related("user", "study")

    @admin.display(description="Phase", ordering="study__phase")
    def study_phase(self, obj: Membership) -> str:
        return obj.study.get_phase_display()


# --- setup: attributes, metrics, candidates, measurements -----------------------


class MetricAdminForm(forms.ModelForm):
    """The admin's metric form (ModelAdmin.get_form builds on it): the
    attribute must be of the metric's study."""

    def clean(self) -> dict[str, Any]:
        cleaned = cast(dict[str, Any], super().clean())  # ModelForm.clean returns cleaned_data
        study, attribute = cleaned.get("study"), cleaned.get("attribute")
        if study and attribute and attribute.study_id != study.pk:
            raise ValidationError({"attribute": "The attribute belongs to another study."})
        return cleaned


class MeasurementAdminForm(forms.ModelForm):
    """The admin's measurement form: the metric and the candidate must be of
    one study."""

    def clean(self) -> dict[str, Any]:
        cleaned = cast(dict[str, Any], super().clean())  # ModelForm.clean returns cleaned_data
        candidate, metric = cleaned.get("candidate"), cleaned.get("metric")
        if candidate and metric and candidate.study_id != metric.study_id:
            raise ValidationError({"metric": "The metric belongs to another study than the candidate."})
        return cleaned


class MetricInlineFormSet(BaseInlineFormSet):
    """Metrics added under an attribute belong to the attribute's study."""

    def _construct_form(self, i: int, **kwargs: Any) -> "forms.ModelForm[Metric]":
        form = super()._construct_form(i, **kwargs)  # type: ignore[misc]  # the stubs omit BaseFormSet._construct_form
        form.instance.study_id = self.instance.study_id
        return form

    def clean(self) -> None:
        super().clean()
        # ``study`` is not a form field, so Django skips the (study, name)
        # constraint: check it here instead of failing at the database.
        names = {}
        for form in self.forms:
            if not form.has_changed() or self._should_delete_form(form):  # type: ignore[attr-defined]  # missing from the stubs
                continue
            name = form.cleaned_data.get("name")
            if not name:
                continue
            if name in names:
                raise ValidationError(f"Two metrics are named {name!r}.")
            names[name] = form.instance.pk
        if names and self.instance.study_id is not None:
            clashes = Metric.objects.filter(study_id=self.instance.study_id, name__in=names)
            for clash in clashes:
                if names[clash.name] != clash.pk:
                    raise ValidationError(f"A metric named {clash.name!r} already exists in this study.")


class MetricInline(admin.TabularInline):
    model = Metric
    fk_name = "attribute"
    formset = MetricInlineFormSet
    extra = 0
    fields = ("position", "name", "better", "unit", "default_least_acceptable", "default_desired", "is_selected")
    show_change_link = True


@admin.register(QualityAttribute)
class QualityAttributeAdmin(InputsAdmin, admin.ModelAdmin):
    list_display = ("name", "study", "kind", "is_selected", "metric_count", "position")
    list_filter = ("kind", "is_selected", "study__phase")
    list_select_related = ("study",)
    search_fields = ("name", "description", "study__title")
    autocomplete_fields = ("study",)
    inlines = (MetricInline,)

    def get_queryset(self, request: HttpRequest) -> QuerySet[QualityAttribute]:
        return super().get_queryset(request).annotate(_metric_count=Count("metrics"))

    def get_readonly_fields(self, request: HttpRequest, obj: QualityAttribute | None = None) -> tuple[str, ...]:
        # Moving an attribute would leave its metrics in the old study.
        return ("study",) if obj is not None else ()

    @admin.display(description="Metrics", ordering="_metric_count")
    def metric_count(self, obj: "WithAnnotations[QualityAttribute, MetricCount]") -> int:
        return obj._metric_count


@admin.register(Metric)
class MetricAdmin(InputsAdmin, admin.ModelAdmin):
    list_display = (
        "name",
        "attribute",
        "study",
        "better",
        "unit",
        "default_least_acceptable",
        "default_desired",
        "is_selected",
    )
    list_filter = ("better", "is_selected", "study__phase")
    list_select_related = ("study", "attribute")
    search_fields = ("name", "unit", "attribute__name", "study__title")
    autocomplete_fields = ("study", "attribute")

    form = MetricAdminForm


class MeasurementInline(StudyScopedInline):
    model = Measurement
    fields = ("metric", "value")
    scoped_choices = {"metric": lambda candidate: Metric.objects.filter(study_id=candidate.study_id)}


@admin.register(Candidate)
class CandidateAdmin(InputsAdmin, admin.ModelAdmin):
    list_display = ("name", "study", "measurement_count", "position")
    list_filter = ("study__phase",)
    list_select_related = ("study",)
    search_fields = ("name", "description", "study__title")
    autocomplete_fields = ("study",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Candidate]:
        return super().get_queryset(request).annotate(_measurement_count=Count("measurements"))

    def get_inlines(self, request: HttpRequest, obj: Candidate | None) -> tuple[type[MeasurementInline], ...]:
        # Measurements pick metrics of the candidate's study: known once saved.
        return (MeasurementInline,) if obj is not None else ()

    def get_readonly_fields(self, request: HttpRequest, obj: Candidate | None = None) -> tuple[str, ...]:
        return ("study",) if obj is not None else ()

    @admin.display(description="Measurements", ordering="_measurement_count")
    def measurement_count(self, obj: "WithAnnotations[Candidate, MeasurementCount]") -> int:
        return obj._measurement_count


@admin.register(Measurement)
class MeasurementAdmin(InputsAdmin, admin.ModelAdmin):
    list_display = ("candidate", "metric", "value", "study")
    list_filter = ("candidate__study__phase",)
    list_select_related = ("candidate__study", "metric")
    search_fields = ("candidate__name", "metric__name", "candidate__study__title")
    autocomplete_fields = ("candidate", "metric")

    @admin.display(description="Study", ordering="candidate__study__title")
    def study(self, obj: Measurement) -> Study:
        return obj.candidate.study

    form = MeasurementAdminForm


# --- votes ------------------------------------------------------------------------


class ExpertInputAdmin(InputsAdmin, MembershipChoicesMixin, admin.ModelAdmin):
    """Rows that belong to one expert's membership."""

    study_path = "expert__study"

    autocomplete_fields: ClassVar[tuple[str, ...]] = ("expert",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[ExpertInput]:
        # Lists, change pages and inline choices all read the expert's user and study.
        return super().get_queryset(request).select_related("expert__user", "expert__study")

    @admin.display(description="Expert", ordering="expert__user__username")
    def expert_user(self, obj: ExpertInput) -> User:
        return obj.expert.user

    @admin.display(description="Study", ordering="expert__study__title")
    def study(self, obj: ExpertInput) -> Study:
        return obj.expert.study


@admin.register(AttributeVote)
class AttributeVoteAdmin(ExpertInputAdmin):
    list_display = ("expert_user", "attribute", "study")
    list_filter = ("expert__study__phase", "attribute__kind")
    list_select_related = ("expert__user", "expert__study", "attribute")
    search_fields = ("expert__user__username", "attribute__name", "expert__study__title")
    autocomplete_fields = ("expert", "attribute")


@admin.register(MetricVote)
class MetricVoteAdmin(ExpertInputAdmin):
    list_display = ("expert_user", "metric", "study")
    list_filter = ("expert__study__phase",)
    list_select_related = ("expert__user", "expert__study", "metric")
    search_fields = ("expert__user__username", "metric__name", "expert__study__title")
    autocomplete_fields = ("expert", "metric")


# --- prioritisations ----------------------------------------------------------------


class AttributeJudgmentInline(StudyScopedInline):
    model = AttributeJudgment
    fields = ("row", "column", "value")
    scoped_choices = {
        "row": lambda prio: QualityAttribute.objects.filter(study_id=prio.expert.study_id),
        "column": lambda prio: QualityAttribute.objects.filter(study_id=prio.expert.study_id),
    }


class AttributeWeightInline(StudyScopedInline):
    model = AttributeWeight
    fields = ("attribute", "given", "weight")
    scoped_choices = {"attribute": lambda prio: QualityAttribute.objects.filter(study_id=prio.expert.study_id)}


@admin.register(AttributePrioritisation)
class AttributePrioritisationAdmin(ExpertInputAdmin):
    list_display = ("expert_user", "study", "method", "consistency_ratio", "updated_at")
    list_filter = ("method", "expert__study__phase")
    list_select_related = ("expert__user", "expert__study")
    search_fields = ("expert__user__username", "expert__study__title")
    readonly_fields = ("consistency_ratio", "updated_at")

    def get_inlines(
        self, request: HttpRequest, obj: AttributePrioritisation | None
    ) -> tuple[type[StudyScopedInline], ...]:
        return (AttributeJudgmentInline, AttributeWeightInline) if obj is not None else ()


class MetricJudgmentInline(StudyScopedInline):
    model = MetricJudgment
    fields = ("row", "column", "value")
    scoped_choices = {
        "row": lambda prio: Metric.objects.filter(attribute_id=prio.attribute_id),
        "column": lambda prio: Metric.objects.filter(attribute_id=prio.attribute_id),
    }


class MetricWeightInline(StudyScopedInline):
    model = MetricWeight
    fields = ("metric", "given", "weight")
    scoped_choices = {"metric": lambda prio: Metric.objects.filter(attribute_id=prio.attribute_id)}


@admin.register(MetricPrioritisation)
class MetricPrioritisationAdmin(ExpertInputAdmin):
    list_display = ("expert_user", "attribute", "study", "method", "consistency_ratio", "updated_at")
    list_filter = ("method", "expert__study__phase")
    list_select_related = ("expert__user", "expert__study", "attribute")
    search_fields = ("expert__user__username", "attribute__name", "expert__study__title")
    autocomplete_fields = ("expert", "attribute")
    readonly_fields = ("consistency_ratio", "updated_at")

    def get_inlines(
        self, request: HttpRequest, obj: MetricPrioritisation | None
    ) -> tuple[type[StudyScopedInline], ...]:
        return (MetricJudgmentInline, MetricWeightInline) if obj is not None else ()


class PrioritisationRowAdmin(InputsAdmin, admin.ModelAdmin):
    """Judgments and weights, listed with the expert and study they belong
    to. Subclasses name the row's own fields; the rest follows from them."""

    study_path = "prioritisation__expert__study"
    item_fields: tuple[str, ...] = ()  # the foreign keys to attributes or metrics
    value_fields: tuple[str, ...] = ()
    list_filter = ("prioritisation__method", "prioritisation__expert__study__phase")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.list_display = ("expert_user", *cls.item_fields, *cls.value_fields, "study")
        cls.list_select_related = ("prioritisation__expert__user", "prioritisation__expert__study", *cls.item_fields)
        cls.search_fields = ("prioritisation__expert__user__username", *(f"{field}__name" for field in cls.item_fields))
        cls.autocomplete_fields = ("prioritisation", *cls.item_fields)

    @admin.display(description="Expert", ordering="prioritisation__expert__user__username")
    def expert_user(self, obj: PrioritisationRow) -> User:
        return obj.prioritisation.expert.user

    @admin.display(description="Study", ordering="prioritisation__expert__study__title")
    def study(self, obj: PrioritisationRow) -> Study:
        return obj.prioritisation.expert.study


@admin.register(AttributeJudgment)
class AttributeJudgmentAdmin(PrioritisationRowAdmin):
    item_fields, value_fields = ("row", "column"), ("value",)


@admin.register(AttributeWeight)
class AttributeWeightAdmin(PrioritisationRowAdmin):
    item_fields, value_fields = ("attribute",), ("given", "weight")


@admin.register(MetricJudgment)
class MetricJudgmentAdmin(PrioritisationRowAdmin):
    item_fields, value_fields = ("row", "column"), ("value",)


@admin.register(MetricWeight)
class MetricWeightAdmin(PrioritisationRowAdmin):
    item_fields, value_fields = ("metric",), ("given", "weight")


# --- ranges and peer weights ------------------------------------------------------------


@admin.register(AcceptableRange)
class AcceptableRangeAdmin(ExpertInputAdmin):
    list_display = ("expert_user", "metric", "least_acceptable", "desired", "study")
    list_filter = ("expert__study__phase", "metric__better")
    list_select_related = ("expert__user", "expert__study", "metric")
    search_fields = ("expert__user__username", "metric__name", "expert__study__title")
    autocomplete_fields = ("expert", "metric")


@admin.register(PeerWeight)
class PeerWeightAdmin(InputsAdmin, MembershipChoicesMixin, admin.ModelAdmin):
    study_path = "rater__study"
    list_display = ("rater_user", "ratee_user", "weight", "study")
    list_filter = ("rater__study__phase",)
    list_select_related = ("rater__user", "rater__study", "ratee__user")
    search_fields = ("rater__user__username", "ratee__user__username", "rater__study__title")
    autocomplete_fields = ("rater", "ratee")

    @admin.display(description="Rater", ordering="rater__user__username")
    def rater_user(self, obj: PeerWeight) -> User:
        return obj.rater.user

    @admin.display(description="Ratee", ordering="ratee__user__username")
    def ratee_user(self, obj: PeerWeight) -> User:
        return obj.ratee.user

    @admin.display(description="Study", ordering="rater__study__title")
    def study(self, obj: PeerWeight) -> Study:
        return obj.rater.study


# --- API tokens ---------------------------------------------------------------------


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens can be looked at and revoked (deleted) here, not made: only a
    digest is stored, so a key exists only when the application creates it
    and shows it once."""

    list_display = ("user", "name", "prefix", "created_at", "last_used_at", "expires_at")
    list_filter = ("created_at", "last_used_at", "expires_at")
    list_select_related = ("user",)
    search_fields = ("user__username", "user__email", "name", "prefix")
    fields = ("user", "name", "prefix", "created_at", "last_used_at", "expires_at")
    readonly_fields = fields
    date_hierarchy = "created_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        return False


# --- accounts ------------------------------------------------------------------------


def _username_look_alike(form: forms.ModelForm) -> str:
    """The username of ``form``, refused when another account's name reads
    the same (``ａｌｉｃｅ``, ``Alice`` beside ``alice``: ``username_key``),
    as the sign-up and the imports refuse it."""
    username = form.cleaned_data.get("username") or ""
    existing = usernames_taken(usernames=[username]).get(username) if username else None
    if existing is not None and existing != getattr(form.instance, "username", None):
        raise ValidationError(f"{USERNAME_TAKEN} (it reads as the existing account {existing!r})")
    return username


class LookAlikeSafeUserCreationForm(AdminUserCreationForm):
    def clean_username(self) -> str:
        return _username_look_alike(self)


class LookAlikeSafeUserChangeForm(UserChangeForm):
    def clean_username(self) -> str:
        return _username_look_alike(self)


admin.site.unregister(User)


@admin.register(User)
class AccountAdmin(InputsAdmin, SiteSizeAdmin, UserAdmin):
    """Django's user admin, whose forms refuse look-alike usernames. A
    username is in the snapshots of its studies (``InputsAdmin``)."""

    study_path = "memberships__study"

    add_form = LookAlikeSafeUserCreationForm
    form = LookAlikeSafeUserChangeForm


# --- History (issue 22): read-only ----------------------------------------------------


class HistoryRecordAdmin(SiteSizeAdmin, admin.ModelAdmin):
    """A kind's history records: listed, filtered and read; never added,
    changed or deleted (no one edits the trail). Filtered without reading
    the whole table (workspace.admin_lists): by date with the date filter,
    by source from the sources there can be."""

    list_display = ("history_date", "history_type", "history_user", "history_source", "history_study_id", "id")
    list_filter = ("history_type", HistorySourceFilter, "history_date")
    search_fields = ("=history_study_id", "history_user__username")
    list_select_related = ("history_user",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


def _register_history_admins() -> None:
    for model in KINDS.values():
        admin.site.register(model.history.model, HistoryRecordAdmin)  # type: ignore[attr-defined]  # django-simple-history adds the history manager at run time


_register_history_admins()


@admin.register(StudyDeletion)
class StudyDeletionAdmin(admin.ModelAdmin):
    """Deleted studies: who, when, from where, and the bundle at that
    moment, kept APPROVE_DELETED_STUDY_RETENTION_DAYS. Read-only."""

    list_display = ("title", "study_id", "deleted_by", "deleted_at", "source")
    search_fields = ("title", "=study_id")
    date_hierarchy = "deleted_at"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: StudyDeletion | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: StudyDeletion | None = None) -> bool:
        return False
