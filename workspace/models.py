"""The study and everything people enter into it (METHOD.md sections 1-5).

Rows hold one fact each and the database enforces what it can: one vote per
expert and item, one judgment per expert and pair, one range per expert and
metric, one peer weight per rater and ratee. Rules that need several rows
(weights summing to 1, complete peer-weight rows, phases) live in
``workspace.services``; models only describe.
"""

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Greatest, Least, Length
from django.db.models.lookups import LessThanOrEqual
from django.utils import timezone

from engine.rules import (
    AHP_WEIGHTING_DEFAULT,
    AHP_WEIGHTINGS,
    SCALE_DATABASE_SLACK,
    SCALE_DATABASE_SLACK_ABOVE,
    SCALE_MAX,
    SCALE_MIN,
)

from . import history as recorded
from .history import StudyHistory
from .limits import (
    ABSENCE_REASON_MAX_CHARS,
    ATTRIBUTE_THRESHOLD_DEFAULT,
    DISCUSSION_POST_MAX_CHARS,
    IDEMPOTENCY_KEY_MAX_LENGTH,
    METRIC_THRESHOLD_DEFAULT,
    NAME_MAX_LENGTH,
    ROUND_MESSAGE_MAX_CHARS,
    ROUND_REASON_MAX_CHARS,
    TITLE_MAX_LENGTH,
    UNIT_MAX_LENGTH,
    USERNAME_MAX_LENGTH,
)


class Phase(models.TextChoices):
    DRAFT = "draft", "Draft"
    VOTING = "voting", "Voting"
    ASSESSMENT = "assessment", "Assessment"
    CLOSED = "closed", "Closed"


class AhpWeighting(models.TextChoices):
    """How AHP weights come from a matrix (engine.rules.AHP_WEIGHTINGS)."""

    COLUMN_MEANS = "column_means", "Column means (the method's own, the default)"
    EIGENVECTOR = "eigenvector", "Principal eigenvector"
    GEOMETRIC_MEAN = "geometric_mean", "Row geometric mean"


assert set(AhpWeighting.values) == set(AHP_WEIGHTINGS), "AhpWeighting must list engine.rules.AHP_WEIGHTINGS"


class StudyQuerySet(models.QuerySet):
    def delete(self) -> tuple[int, dict[str, int]]:
        """Deleting studies records each study's deletion, not one record per
        row deleted with it (``workspace.history.delete``), however it is
        deleted: the service, the admin, a shell."""
        deleted = recorded.delete(self, cascade_recorded=False)
        return deleted, {self.model._meta.label: deleted}


class Study(models.Model):
    title = models.CharField(max_length=TITLE_MAX_LENGTH)
    description = models.TextField(blank=True)
    phase = models.CharField(max_length=20, choices=Phase.choices, default=Phase.DRAFT)
    # "At least c votes" selects an item (METHOD.md section 2, Decision).
    attribute_threshold = models.PositiveIntegerField(default=ATTRIBUTE_THRESHOLD_DEFAULT)
    metric_threshold = models.PositiveIntegerField(default=METRIC_THRESHOLD_DEFAULT)
    # How AHP weights are computed from the experts' judgments (METHOD.md 3;
    # docs/method.md): the paper's method unless the designer chooses another
    # while the design may change.
    ahp_weighting = models.CharField(max_length=20, choices=AhpWeighting.choices, default=AHP_WEIGHTING_DEFAULT)
    # The fewest experts who must take part (not excluded or abstaining) for
    # the assessment to close (docs/method.md, "Absent experts"); 0: any number.
    quorum = models.PositiveIntegerField(default=0)
    designer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="designed_studies")
    # Counts the changes that may alter a run's snapshot (engine.snapshot):
    # every one bumps it in its own transaction (workspace.services._checks:
    # ``locked`` and ``inputs_changed``), so two launches at the same version
    # have the same inputs and the second copies the first's snapshot.
    input_version = models.PositiveBigIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    if TYPE_CHECKING:
        # Set on a study read for a member by views.common.study_for_member
        # (the prefetched ``my_memberships`` are typed by the selectors).
        my_roles: set[str]
        is_designer: bool
        is_expert: bool
    history = StudyHistory(kind="study", scope=recorded.the_study, excluded_fields=["input_version", "updated_at"])
    objects = StudyQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "studies"
        ordering = ["-created_at", "-id"]
        # The newest studies of the whole site (the admin's list), without sorting them all.
        indexes = [models.Index(fields=["-created_at", "-id"], name="study_newest")]
        constraints = [
            models.CheckConstraint(condition=Q(phase__in=Phase.values), name="study_phase_valid"),
            models.CheckConstraint(
                condition=Q(ahp_weighting__in=AhpWeighting.values), name="study_ahp_weighting_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.title

    def delete(self, using: Any = None, keep_parents: bool = False) -> tuple[int, dict[str, int]]:
        """As ``StudyQuerySet.delete``: the study's deletion recorded, not each row's."""
        return Study.objects.filter(pk=self.pk).delete()


class Membership(models.Model):
    """A person's part in a study. The designer holds a ``designer`` row; any
    user, the designer included, who gives opinions holds an ``expert`` row.
    Every expert input points at the expert's membership, so removing an
    expert removes their inputs with them."""

    class Role(models.TextChoices):
        DESIGNER = "designer", "Designer"
        EXPERT = "expert", "Expert"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        # Made an expert by someone else's import: not theirs, and their
        # imported inputs do not count, until they accept (workspace.invitations).
        PENDING = "pending", "Pending acceptance"

    role = models.CharField(max_length=20, choices=Role.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    inputs_imported_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="who imported this expert's inputs in their name (null: entered by the expert, or the command line)",
    )
    inputs_confirmed_at = models.DateTimeField(null=True, blank=True)
    # When the expert last saved or confirmed their acceptable ranges (page,
    # API or bundle). Null: the designer's default ranges are unconfirmed.
    ranges_confirmed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # The designer's last e-mail reminder to this expert (workspace.reminders):
    # when, and whether it reached them ("" when it did) or why not.
    last_reminded_at = models.DateTimeField(null=True, blank=True)
    last_reminder_unreached = models.CharField(max_length=300, blank=True, default="")

    class Absence(models.TextChoices):
        # An expert who takes part: their inputs count ("").
        NONE = "", "Takes part"
        # Taken off the panel by the designer (on leave, left the team).
        EXCLUDED = "excluded", "Excluded"
        # Keeps watching but gives no more inputs for the rest of the study.
        ABSTAINING = "abstaining", "Abstaining"

    # An absent expert's inputs are kept but not used: no run, no revision
    # round, no close check counts them (docs/method.md, "Absent experts").
    absence = models.CharField(max_length=12, choices=Absence.choices, default=Absence.NONE, blank=True)
    absence_reason = models.CharField(max_length=ABSENCE_REASON_MAX_CHARS, blank=True, default="")
    absent_since = models.DateTimeField(null=True, blank=True)
    if TYPE_CHECKING:
        missing: list[str] | None  # set by the experts page (None outside the assessment)
        notes: list[str]  # set by the experts page: input_notes in words (issue 16)
    history = StudyHistory(kind="membership", scope=recorded.of_membership)

    class Meta:
        ordering = ["study", "role", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "user", "role"], name="membership_unique_role"),
            models.UniqueConstraint(fields=["study"], condition=Q(role="designer"), name="membership_one_designer"),
            models.CheckConstraint(condition=Q(role__in=["designer", "expert"]), name="membership_role_valid"),
            models.CheckConstraint(condition=Q(status__in=["active", "pending"]), name="membership_status_valid"),
            models.CheckConstraint(
                condition=Q(status="active") | Q(role="expert"), name="membership_only_experts_pending"
            ),
            models.CheckConstraint(
                condition=Q(absence="") | Q(role="expert", absence__in=["excluded", "abstaining"]),
                name="membership_only_experts_absent",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.role}) in {self.study}"


class QualityAttribute(models.Model):
    class Kind(models.TextChoices):
        MAIN = "main", "Main (always selected)"
        COMPLEMENTARY = "complementary", "Complementary (selected by vote)"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="attributes")
    name = models.CharField(max_length=NAME_MAX_LENGTH)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.MAIN)
    if TYPE_CHECKING:
        ballot_metrics: list["Metric"]  # selectors.ballot_list's prefetch
        metric_names: list[str]  # set by the setup page
    description = models.TextField(blank=True)
    position = models.PositiveIntegerField(default=0)
    # Fixed when voting closes; meaningless before.
    is_selected = models.BooleanField(default=False)
    history = StudyHistory(kind="attribute", scope=recorded.of_study)

    class Meta:
        ordering = ["study", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="attribute_unique_name"),
            models.CheckConstraint(condition=Q(kind__in=["main", "complementary"]), name="attribute_kind_valid"),
            models.CheckConstraint(condition=~Q(name=""), name="attribute_name_not_empty"),
        ]

    def __str__(self) -> str:
        return self.name


class Direction(models.TextChoices):
    HIGHER = "higher", "Higher is better"
    LOWER = "lower", "Lower is better"


class Metric(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="metrics")
    attribute = models.ForeignKey(QualityAttribute, on_delete=models.CASCADE, related_name="metrics")
    name = models.CharField(max_length=NAME_MAX_LENGTH)
    better = models.CharField(max_length=10, choices=Direction.choices, default=Direction.HIGHER)
    unit = models.CharField(max_length=UNIT_MAX_LENGTH, blank=True)
    if TYPE_CHECKING:
        range_text: str | None  # set by the setup page
    # The designer's proposed acceptable range; experts accept or change it.
    default_least_acceptable = models.FloatField(null=True, blank=True)
    default_desired = models.FloatField(null=True, blank=True)
    position = models.PositiveIntegerField(default=0)
    is_selected = models.BooleanField(default=False)
    history = StudyHistory(kind="metric", scope=recorded.of_study)

    class Meta:
        ordering = ["study", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="metric_unique_name"),
            models.CheckConstraint(condition=Q(better__in=["higher", "lower"]), name="metric_better_valid"),
            models.CheckConstraint(condition=~Q(name=""), name="metric_name_not_empty"),
            models.CheckConstraint(
                # Both bounds or neither; the explicit NOT NULLs matter: a CHECK
                # passes when a comparison with NULL is unknown.
                condition=(Q(default_least_acceptable__isnull=True) & Q(default_desired__isnull=True))
                | (
                    Q(default_least_acceptable__isnull=False, default_desired__isnull=False)
                    & (
                        Q(better="higher", default_least_acceptable__lt=F("default_desired"))
                        | Q(better="lower", default_least_acceptable__gt=F("default_desired"))
                    )
                ),
                name="metric_default_range_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def default_range(self) -> tuple[float, float] | None:
        if self.default_least_acceptable is None:
            return None
        # Both bounds or neither (the metric_default_range_valid constraint).
        return (self.default_least_acceptable, cast(float, self.default_desired))


class Candidate(models.Model):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="candidates")
    name = models.CharField(max_length=NAME_MAX_LENGTH)
    description = models.TextField(blank=True)
    position = models.PositiveIntegerField(default=0)
    history = StudyHistory(kind="candidate", scope=recorded.of_study)

    class Meta:
        ordering = ["study", "position", "id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="candidate_unique_name"),
            models.CheckConstraint(condition=~Q(name=""), name="candidate_name_not_empty"),
        ]

    def __str__(self) -> str:
        return self.name


class Measurement(models.Model):
    # The candidate's study, kept on the row so that a study's measurements
    # are read through this index alone, never by a join over every study's.
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="measurements")
    # No index of its own: measurement_unique (candidate, metric) serves it,
    # and each index costs every bulk import of 20,000 rows.
    candidate = models.ForeignKey(Candidate, on_delete=models.CASCADE, related_name="measurements", db_index=False)
    metric = models.ForeignKey(Metric, on_delete=models.CASCADE, related_name="measurements")
    value = models.FloatField()
    # The value's standard error, when the designer gives one (typed
    # measurements): the Monte Carlo analysis samples Normal(value, SE).
    # Non-negative and finite (services check it; the validator guards the
    # admin's form, whose float field refuses what is not finite); null when none.
    standard_error = models.FloatField(null=True, blank=True, validators=[MinValueValidator(0)])
    history = StudyHistory(kind="measurement", scope=recorded.of_study)

    class Meta:
        ordering = ["candidate", "metric"]
        constraints = [
            models.UniqueConstraint(fields=["candidate", "metric"], name="measurement_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.candidate} {self.metric} = {self.value}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # A row saved one at a time (the admin) takes its candidate's study;
        # bulk writers (services.measurements_set) set it themselves.
        if self.candidate_id is not None:
            self.study_id = self.candidate.study_id
        super().save(*args, **kwargs)


# --- Voting (phase "voting") ---------------------------------------------------
# A row is a "yes" vote (u_ij = 1); no row is u_ij = 0.


class AttributeVote(models.Model):
    expert = models.ForeignKey(Membership, on_delete=models.CASCADE, related_name="attribute_votes")
    attribute = models.ForeignKey(QualityAttribute, on_delete=models.CASCADE, related_name="votes")
    history = StudyHistory(kind="attribute_vote", scope=recorded.by_expert())

    class Meta:
        constraints = [models.UniqueConstraint(fields=["expert", "attribute"], name="attribute_vote_unique")]

    def __str__(self) -> str:
        return f"{self.expert.user} for {self.attribute}"


class MetricVote(models.Model):
    expert = models.ForeignKey(Membership, on_delete=models.CASCADE, related_name="metric_votes")
    metric = models.ForeignKey(Metric, on_delete=models.CASCADE, related_name="votes")
    history = StudyHistory(kind="metric_vote", scope=recorded.by_expert())

    class Meta:
        constraints = [models.UniqueConstraint(fields=["expert", "metric"], name="metric_vote_unique")]

    def __str__(self) -> str:
        return f"{self.expert.user} for {self.metric}"


# --- Prioritisation (phase "assessment", METHOD.md section 3) ------------------


class Method(models.TextChoices):
    DIRECT = "direct", "Direct weights"
    AHP = "ahp", "AHP pairwise comparisons"
    LPR = "lpr", "Large Preference Relation"


class PrioritisationBase(models.Model):
    method = models.CharField(max_length=10, choices=Method.choices)
    # Computed from the judgments when they are saved (AHP, LPR); shown as a
    # warning above engine.rules.CONSISTENCY_THRESHOLD, never a refusal.
    consistency_ratio = models.FloatField(null=True, blank=True)
    # When the expert, on the priorities page, chose to keep judgments whose
    # consistency ratio is above the threshold (METHOD.md 3, Decision: the
    # expert acknowledged CR x at time t). Null: consistent, or saved without
    # the page's confirmation (the API and bundles accept judgments as given).
    inconsistency_acknowledged_at = models.DateTimeField(null=True, blank=True)
    # What reading the prioritisation shows, computed once when it is saved.
    # Set and read it through ``result_record``: the weights are stored as
    # [[item, weight], ...] because PostgreSQL's jsonb does not keep the order
    # of an object's keys, and the items' order is part of the result.
    result = models.JSONField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True

    @property
    def result_record(self) -> dict | None:
        """``{"weights": {item: weight} (in the items' order),
        "consistency_ratio", "most_inconsistent": [{"row", "column", "value",
        "error", "suggested_value"}]}``, or None."""
        return result_record_of(self.result)

    @result_record.setter
    def result_record(self, record: dict) -> None:
        self.result = {**record, "weights": [[item, weight] for item, weight in record["weights"].items()]}


def result_record_of(result: dict | None) -> dict | None:
    """A prioritisation's stored ``result`` as ``result_record`` gives it
    (for reads of plain values, without the model instance)."""
    if result is None:
        return None
    weights = result["weights"]
    # Rows stored before the pairs were introduced hold an object.
    pairs = weights.items() if isinstance(weights, dict) else weights
    return {**result, "weights": dict(pairs)}


class JudgmentBase(models.Model):
    # The reciprocal judgment (column over row) is implied and never stored.
    value = models.FloatField()

    class Meta:
        abstract = True


class WeightBase(models.Model):
    # What the expert typed for direct weights (any positive scale); null for
    # AHP and LPR, whose weights come from the judgments.
    given = models.FloatField(null=True, blank=True)
    weight = models.FloatField()

    class Meta:
        abstract = True


def _judgment_constraints(prefix: str) -> list[models.BaseConstraint]:
    # A small tolerance lets 1/9 written as 0.1111 pass; the service checks exactly
    # (engine.rules: SCALE_INPUT_SLACK must stay below SCALE_DATABASE_SLACK).
    return [
        # One judgment per pair in either orientation: (A, B) and (B, A) are the same pair.
        models.UniqueConstraint(
            "prioritisation", Least("row", "column"), Greatest("row", "column"), name=f"{prefix}_judgment_unique"
        ),
        models.CheckConstraint(condition=~Q(row=F("column")), name=f"{prefix}_judgment_not_diagonal"),
        models.CheckConstraint(
            condition=Q(value__gte=SCALE_MIN - SCALE_DATABASE_SLACK, value__lte=SCALE_MAX + SCALE_DATABASE_SLACK_ABOVE),
            name=f"{prefix}_judgment_on_scale",
        ),
    ]


def _weight_constraints(prefix: str, item: str) -> list[models.BaseConstraint]:
    return [
        models.UniqueConstraint(fields=["prioritisation", item], name=f"{prefix}_weight_unique"),
        models.CheckConstraint(condition=Q(weight__gt=0, weight__lte=1), name=f"{prefix}_weight_in_range"),
        models.CheckConstraint(condition=Q(given__isnull=True) | Q(given__gt=0), name=f"{prefix}_given_positive"),
    ]


class AttributePrioritisation(PrioritisationBase):
    """An expert's prioritisation of the selected attributes (row w_i of W)."""

    expert = models.OneToOneField(Membership, on_delete=models.CASCADE, related_name="attribute_prioritisation")
    history = StudyHistory(kind="attribute_prioritisation", scope=recorded.by_expert())

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(method__in=Method.values), name="attribute_prio_method_valid")
        ]

    def __str__(self) -> str:
        return f"{self.expert.user} ({self.method})"


class AttributeJudgment(JudgmentBase):
    prioritisation = models.ForeignKey(AttributePrioritisation, on_delete=models.CASCADE, related_name="judgments")
    row = models.ForeignKey(QualityAttribute, on_delete=models.CASCADE, related_name="+")
    column = models.ForeignKey(QualityAttribute, on_delete=models.CASCADE, related_name="+")
    history = StudyHistory(kind="attribute_judgment", scope=recorded.through("prioritisation"))

    class Meta:
        constraints = _judgment_constraints("attribute")

    def __str__(self) -> str:
        return f"{self.row} over {self.column}: {self.value:g}"


class AttributeWeight(WeightBase):
    prioritisation = models.ForeignKey(AttributePrioritisation, on_delete=models.CASCADE, related_name="weights")
    attribute = models.ForeignKey(QualityAttribute, on_delete=models.CASCADE, related_name="+")
    history = StudyHistory(kind="attribute_weight", scope=recorded.through("prioritisation"))

    class Meta:
        constraints = _weight_constraints("attribute", "attribute")

    def __str__(self) -> str:
        return f"{self.attribute}: {self.weight:g}"


class MetricPrioritisation(PrioritisationBase):
    """An expert's optional local prioritisation of one attribute's selected
    metrics; without it the attribute's weight is split equally."""

    expert = models.ForeignKey(Membership, on_delete=models.CASCADE, related_name="metric_prioritisations")
    attribute = models.ForeignKey(QualityAttribute, on_delete=models.CASCADE, related_name="metric_prioritisations")
    history = StudyHistory(kind="metric_prioritisation", scope=recorded.by_expert())

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["expert", "attribute"], name="metric_prio_unique"),
            models.CheckConstraint(condition=Q(method__in=Method.values), name="metric_prio_method_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.expert.user} on {self.attribute} ({self.method})"


class MetricJudgment(JudgmentBase):
    prioritisation = models.ForeignKey(MetricPrioritisation, on_delete=models.CASCADE, related_name="judgments")
    row = models.ForeignKey(Metric, on_delete=models.CASCADE, related_name="+")
    column = models.ForeignKey(Metric, on_delete=models.CASCADE, related_name="+")
    history = StudyHistory(kind="metric_judgment", scope=recorded.through("prioritisation"))

    class Meta:
        constraints = _judgment_constraints("metric")

    def __str__(self) -> str:
        return f"{self.row} over {self.column}: {self.value:g}"


class MetricWeight(WeightBase):
    prioritisation = models.ForeignKey(MetricPrioritisation, on_delete=models.CASCADE, related_name="weights")
    metric = models.ForeignKey(Metric, on_delete=models.CASCADE, related_name="+")
    history = StudyHistory(kind="metric_weight", scope=recorded.through("prioritisation"))

    class Meta:
        constraints = _weight_constraints("metric", "metric")

    def __str__(self) -> str:
        return f"{self.metric}: {self.weight:g}"


# --- Ranges and peer weights (phase "assessment", METHOD.md sections 4-5) ------


class AcceptableRange(models.Model):
    """Expert i's range [b^l_ij, b^u_ij] for metric j: ``least_acceptable`` is
    b^l, ``desired`` is b^u. Lower-is-better metrics have least > desired."""

    expert = models.ForeignKey(Membership, on_delete=models.CASCADE, related_name="ranges")
    metric = models.ForeignKey(Metric, on_delete=models.CASCADE, related_name="ranges")
    least_acceptable = models.FloatField()
    desired = models.FloatField()
    # Set when the metric's values changed under the range (it became an
    # elicited metric, or its elicitation changed: evaluation.services), so
    # the expert is asked to confirm or change it; saving ranges clears it.
    needs_confirmation = models.BooleanField(default=False)
    history = StudyHistory(kind="range", scope=recorded.by_expert())

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["expert", "metric"], name="range_unique"),
            models.CheckConstraint(condition=~Q(least_acceptable=F("desired")), name="range_bounds_distinct"),
        ]

    def __str__(self) -> str:
        return f"{self.expert.user}: {self.metric} [{self.least_acceptable}, {self.desired}]"


class PeerWeight(models.Model):
    """v_ij: how much expert ``rater`` trusts expert ``ratee`` (self included)."""

    rater = models.ForeignKey(Membership, on_delete=models.CASCADE, related_name="peer_weights_given")
    ratee = models.ForeignKey(Membership, on_delete=models.CASCADE, related_name="peer_weights_received")
    weight = models.FloatField()
    history = StudyHistory(kind="peer_weight", scope=recorded.by_expert("rater"))

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["rater", "ratee"], name="peer_weight_unique"),
            # Strictly positive: no expert may silence another (METHOD.md 5);
            # 1 only for a lone expert rating themself.
            models.CheckConstraint(condition=Q(weight__gt=0, weight__lte=1), name="peer_weight_in_range"),
        ]

    def __str__(self) -> str:
        return f"{self.rater.user} → {self.ratee.user}: {self.weight}"


class EmailConfirmation(models.Model):
    """The account's e-mail address was confirmed: its owner followed the
    link mailed to it (workspace.services.accounts). Confirms ``email`` only:
    a changed address is unconfirmed until its own link is followed."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="email_confirmation")
    email = models.EmailField()
    confirmed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.user}: {self.email}"


class ApiToken(models.Model):
    """A personal API token (``Authorization: Token <key>``). Only a SHA-256
    digest of the key is stored: the key is shown once, when created. A
    token stops working at ``expires_at``; all of a user's tokens are deleted
    when their password changes."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=NAME_MAX_LENGTH, blank=True)
    digest = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=8, help_text="first characters of the key, to tell tokens apart")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(help_text="the token authenticates no one from this moment")

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.user} {self.prefix}… {self.name}"


def _invitation_expiry() -> datetime:
    return timezone.now() + timedelta(days=settings.INVITATION_LIFETIME_DAYS)


class Invitation(models.Model):
    """An offer to become an expert of a study, which the person accepts or
    declines. Addressed to a ``username`` (the account need not exist), or a
    link (``username`` null) whose key is shown once: only its SHA-256
    ``digest`` is stored, like an API token's. A link may be addressed to an
    ``email`` address: the key then goes only into the mail to it, and the
    account that confirmed that address (by its link, or single sign-on's
    verified address) sees the invitation among its own. ``membership`` is
    the pending membership a staff import created with inputs in the
    person's name."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        ACCEPTED = "accepted", "Accepted"
        DECLINED = "declined", "Declined"
        REVOKED = "revoked", "Revoked"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="invitations")
    # Null, not "", marks a link invitation: the constraints pair it with a digest.
    username = models.CharField(max_length=USERNAME_MAX_LENGTH, null=True, blank=True)  # noqa: DJ001
    digest = models.CharField(max_length=64, unique=True, null=True, blank=True)
    # Only on a link: the address its key was mailed to ("" for a link handed over by the designer).
    email = models.EmailField(blank=True, default="")
    membership = models.ForeignKey(
        Membership, on_delete=models.CASCADE, null=True, blank=True, related_name="invitations"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(default=_invitation_expiry)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    decided_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    history = StudyHistory(kind="invitation", scope=recorded.of_study, excluded_fields=["digest"])

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["pending", "accepted", "declined", "revoked"]), name="invitation_status_valid"
            ),
            # Exactly one kind: addressed to a username, or a link with a key.
            models.CheckConstraint(
                condition=(Q(username__isnull=False) & Q(digest__isnull=True))
                | (Q(username__isnull=True) & Q(digest__isnull=False)),
                name="invitation_username_or_link",
            ),
            # An address only on a link: the key is what the mail carries.
            models.CheckConstraint(condition=Q(email="") | Q(digest__isnull=False), name="invitation_email_on_link"),
        ]
        indexes = [models.Index(fields=["email", "status"], name="invitation_email_status")]

    def __str__(self) -> str:
        return f"{self.username or self.email or 'link'} to {self.study} ({self.status})"

    @property
    def is_link(self) -> bool:
        return self.username is None

    @property
    def is_expired(self) -> bool:
        return self.status == self.Status.PENDING and self.expires_at <= timezone.now()


# --- Discussion ------------------------------------------------------------------


class Post(models.Model):
    """A message in the discussion thread of one attribute or one metric of a
    study. Members write them in any phase. The designer may hide a post: it
    stays, marked hidden, for the designer, and reads "hidden by the
    designer" for everyone else."""

    # Also reachable through the item; kept so a study's whole discussion is
    # one indexed query. The services keep it equal to the item's study.
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="posts")
    attribute = models.ForeignKey(
        QualityAttribute, on_delete=models.CASCADE, null=True, blank=True, related_name="posts"
    )
    metric = models.ForeignKey(Metric, on_delete=models.CASCADE, null=True, blank=True, related_name="posts")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="discussion_posts")
    body = models.TextField(max_length=DISCUSSION_POST_MAX_CHARS)
    created_at = models.DateTimeField(auto_now_add=True)
    edited_at = models.DateTimeField(null=True, blank=True, help_text="when its author last changed the body")
    hidden_at = models.DateTimeField(null=True, blank=True, help_text="hidden by the designer from this moment")
    hidden_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["created_at", "id"]
        constraints = [
            # A thread is about exactly one item: an attribute or a metric.
            models.CheckConstraint(
                condition=(Q(attribute__isnull=False) & Q(metric__isnull=True))
                | (Q(attribute__isnull=True) & Q(metric__isnull=False)),
                name="post_attribute_or_metric",
            ),
            models.CheckConstraint(condition=~Q(body=""), name="post_body_not_empty"),
            models.CheckConstraint(
                condition=LessThanOrEqual(Length("body"), DISCUSSION_POST_MAX_CHARS), name="post_body_length"
            ),
            # hidden_by goes null if that account is deleted; the post stays hidden.
            models.CheckConstraint(
                condition=Q(hidden_at__isnull=False) | Q(hidden_by__isnull=True), name="post_hidden_by_needs_hidden_at"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.author} on {self.attribute or self.metric}: {self.body[:40]}"

    @property
    def is_hidden(self) -> bool:
        return self.hidden_at is not None

    @property
    def thread_anchor(self) -> str:
        """The thread's anchor on the discussion page (PAGES.md, binding)."""
        return f"attribute-{self.attribute_id}" if self.attribute_id is not None else f"metric-{self.metric_id}"


class IdempotencyKey(models.Model):
    """An ``Idempotency-Key`` a user sent with a create (docs/api.md,
    "Idempotency"): the hash of the request it came with and, once that
    request has succeeded, its answer (status, body, ``Location``), which the
    same key sends again for a day. A row without a status is a request still
    in progress. Rows older than a day are deleted as new keys come in."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=IDEMPOTENCY_KEY_MAX_LENGTH)
    request_hash = models.CharField(max_length=64, help_text="SHA-256 of the method, the path and the canonical body")
    status = models.PositiveSmallIntegerField(null=True, blank=True, help_text="empty while in progress")
    body = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    headers = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_once_per_user")]

    def __str__(self) -> str:
        return f"{self.user_id} {self.key}"


# --- History --------------------------------------------------------------------


class StudyDeletion(models.Model):
    """A deleted study: who deleted it, when, from where, and its bundle
    (approve-study/1) at that moment. Kept with the study's history for
    ``APPROVE_DELETED_STUDY_RETENTION_DAYS``, then removed by the sweep
    (``workspace.services.history.study_deletions_purge``)."""

    study_id = models.BigIntegerField(db_index=True)
    title = models.CharField(max_length=TITLE_MAX_LENGTH)
    designer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    deleted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    deleted_at = models.DateTimeField(default=timezone.now, db_index=True)
    source = models.CharField(max_length=16)
    bundle = models.JSONField(encoder=DjangoJSONEncoder)

    class Meta:
        ordering = ["-deleted_at", "-id"]

    def __str__(self) -> str:
        return f"{self.title} (deleted {self.deleted_at:%Y-%m-%d})"


# --- Revision rounds (issue 22: Delphi rounds in the assessment phase) ------------


#: A round is open until it is closed: the one rule, for queries (``open``,
#: ``closed``), for an instance (``RevisionRound.is_open``) and for the
#: database's "at most one open" constraint.
OPEN_ROUND = Q(closed_at__isnull=True)


class RoundQuerySet(models.QuerySet["RevisionRound"]):
    def open(self) -> "RoundQuerySet":
        """The rounds still open (at most one per study)."""
        return self.filter(OPEN_ROUND)

    def closed(self) -> "RoundQuerySet":
        return self.exclude(OPEN_ROUND)


class RevisionRound(models.Model):
    """A numbered Delphi round of a study's assessment: opened by the designer
    with an optional message, each expert sees the group's anonymised answers
    beside their own and revises or confirms each step; closing it freezes
    ``snapshot``, every expert's inputs at that moment
    (``workspace.selectors.snapshot.inputs_snapshot``); opening it freezes ``feedback``,
    the group feedback the experts read during it (METHOD.md 9, rule 4).
    At most one round is open."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="rounds")
    number = models.PositiveIntegerField()
    message = models.TextField(blank=True, max_length=ROUND_MESSAGE_MAX_CHARS)
    opened_at = models.DateTimeField(default=timezone.now)
    opened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    closed_at = models.DateTimeField(null=True, blank=True)
    closed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    snapshot = models.JSONField(null=True, blank=True, help_text="the inputs at the round's close")
    # The group feedback every expert reads during the round, computed once
    # from the inputs as they stood when it opened (engine.feedback.round_feedback).
    feedback = models.JSONField(null=True, blank=True, help_text="the group feedback, frozen when the round opened")
    history = StudyHistory(kind="revision_round", scope=recorded.of_study, excluded_fields=["snapshot", "feedback"])

    objects = RoundQuerySet.as_manager()

    class Meta:
        ordering = ["study", "number"]
        constraints = [
            models.UniqueConstraint(fields=["study", "number"], name="round_unique_number"),
            models.UniqueConstraint(fields=["study"], condition=OPEN_ROUND, name="round_one_open"),
            models.CheckConstraint(condition=Q(number__gte=1), name="round_number_positive"),
            models.CheckConstraint(condition=OPEN_ROUND | Q(snapshot__isnull=False), name="round_closed_has_snapshot"),
        ]

    def __str__(self) -> str:
        return f"{self.study} round {self.number}"

    @property
    def is_open(self) -> bool:
        return self.closed_at is None


class RoundStep(models.TextChoices):
    """The steps an expert revises or confirms in a round."""

    PRIORITIES = "priorities", "Priorities"
    RANGES = "ranges", "Ranges"
    PEER_WEIGHTS = "peer_weights", "Peer weights"


class RoundResponse(models.Model):
    """An expert's answer to a round for one step: ``revised`` (they saved
    the step during the round) or ``confirmed`` (they kept it), with an
    optional reason the group reads, without its author, in the next round."""

    class Action(models.TextChoices):
        REVISED = "revised", "Revised"
        CONFIRMED = "confirmed", "Confirmed"

    round = models.ForeignKey(RevisionRound, on_delete=models.CASCADE, related_name="responses")
    expert = models.ForeignKey(Membership, on_delete=models.CASCADE, related_name="round_responses")
    step = models.CharField(max_length=20, choices=RoundStep.choices)
    action = models.CharField(max_length=10, choices=Action.choices)
    reason = models.TextField(blank=True, max_length=ROUND_REASON_MAX_CHARS)
    responded_at = models.DateTimeField(default=timezone.now)
    history = StudyHistory(kind="round_response", scope=recorded.by_expert("expert"))

    class Meta:
        ordering = ["round", "expert", "step"]
        constraints = [
            models.UniqueConstraint(fields=["round", "expert", "step"], name="round_response_unique"),
            models.CheckConstraint(condition=Q(step__in=RoundStep.values), name="round_response_step_valid"),
            models.CheckConstraint(
                condition=Q(action__in=["revised", "confirmed"]), name="round_response_action_valid"
            ),
            models.CheckConstraint(
                condition=LessThanOrEqual(Length("reason"), ROUND_REASON_MAX_CHARS), name="round_response_reason_length"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.expert.user} {self.action} {self.step} in {self.round}"
