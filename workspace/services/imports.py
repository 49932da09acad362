"""The bundle importer's bulk services (``workspace.bundles``): attributes,
metrics and invitations by username, each written in a number of queries
that does not grow with the items, with the rules of the one-item services
(``attribute_add``, ``metric_add``, ``invitations.invitation_create``) and
their messages, nested under the item's path in the bundle
(``attributes[3].name``). The first bad item is refused; nothing is written.

An import at every limit made ~2,800 queries, 460 of them locking the study
again, when each item went through its one-item service (issue 17, finding
2); these bring it to a few dozen.
"""

from collections import defaultdict
from typing import Any

from django.contrib.auth.models import User
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from .. import history
from ..errors import InvalidInput
from ..limits import NAME_MAX_LENGTH
from ..models import Invitation, Measurement, Membership, Metric, QualityAttribute, Study
from ._checks import locked, next_position, range_pair, text
from .accounts import username_clean
from .phases import Action, require_phase
from .setup import KEEP, _better, _description, _kind, _measurement_rows, _unit


def _name(value: Any, taken: set[str], model: type[QualityAttribute | Metric]) -> str:
    """As ``_checks.unique_name``, against the names ``taken`` (which it extends)."""
    name = text(value, "name", max_length=NAME_MAX_LENGTH)
    if name in taken:
        raise InvalidInput({"name": f"{model._meta.verbose_name} {name!r} already exists in this study"})
    taken.add(name)
    return name


@transaction.atomic
def attributes_add_many(*, study: Study, entries: list[dict[str, Any]], path: str = "attributes") -> list:
    """Add ``[{"name", "kind", "description"}]`` after the study's attributes,
    in this order. Queries: the lock, the names taken, the last position,
    one INSERT."""
    study = locked(study)
    require_phase(study, Action.ADD_ATTRIBUTE)
    taken = set(QualityAttribute.objects.filter(study=study).values_list("name", flat=True))
    position = next_position(study.attributes)
    rows = []
    for index, entry in enumerate(entries):
        try:
            rows.append(
                QualityAttribute(
                    study=study,
                    name=_name(entry.get("name"), taken, QualityAttribute),
                    kind=_kind(entry.get("kind", QualityAttribute.Kind.MAIN)),
                    description=_description(entry.get("description", "")),
                    position=position + index,
                )
            )
        except InvalidInput as error:
            raise error.within(f"{path}[{index}]") from None
    return history.bulk_create(QualityAttribute, rows)


@transaction.atomic
def metrics_add_many(*, study: Study, entries: list[dict[str, Any]], path: str = "metrics") -> list:
    """Add ``[{"attribute": QualityAttribute, "name", "better", "unit",
    "default_range"}]``, each after its attribute's metrics, in this order.
    Queries: the lock, the names taken, the last positions, one INSERT."""
    study = locked(study)
    require_phase(study, Action.ADD_METRIC)
    taken = set(Metric.objects.filter(study=study).values_list("name", flat=True))
    last = defaultdict(
        int,
        Metric.objects.filter(study=study)
        .values("attribute_id")
        .annotate(top=Max("position"))
        .values_list("attribute_id", "top"),
    )
    rows = []
    for index, entry in enumerate(entries):
        try:
            attribute = entry["attribute"]
            if attribute.study_id != study.pk:
                raise InvalidInput({"attribute": "belongs to another study"})
            name = _name(entry.get("name"), taken, Metric)
            better = _better(entry.get("better", "higher"))
            default_range = entry.get("default_range")
            least, desired = (
                range_pair(default_range, "default_range", better) if default_range is not None else (None, None)
            )
            last[attribute.pk] += 1
            rows.append(
                Metric(
                    study=study,
                    attribute=attribute,
                    name=name,
                    better=better,
                    unit=_unit(entry.get("unit", "")),
                    default_least_acceptable=least,
                    default_desired=desired,
                    position=last[attribute.pk],
                )
            )
        except InvalidInput as error:
            raise error.within(f"{path}[{index}]") from None
    return history.bulk_create(Metric, rows)


@transaction.atomic
def invitations_create_many(*, study: Study, created_by: User, usernames: dict[str, str]) -> list[Invitation]:
    """Invite each of ``{field: username}`` (draft phase), as
    ``invitation_create`` would one at a time: the first malformed username,
    or one already an expert or invited (or listed twice), is refused
    naming its field. Queries: the lock, the experts, the invitations, one
    INSERT."""
    study = locked(study)
    require_phase(study, Action.INVITE_EXPERT)
    cleaned = {field: username_clean(username=username, field=field) for field, username in usernames.items()}
    names = set(cleaned.values())
    experts = set(
        Membership.objects.filter(study=study, role=Membership.Role.EXPERT, user__username__in=names).values_list(
            "user__username", flat=True
        )
    )
    invited = set(
        Invitation.objects.filter(
            study=study, username__in=names, status=Invitation.Status.PENDING, expires_at__gt=timezone.now()
        ).values_list("username", flat=True)
    )
    for field, username in cleaned.items():
        if username in experts:
            raise InvalidInput({field: f"{username} is already an expert of this study"})
        if username in invited:
            raise InvalidInput({field: f"{username} is already invited to this study"})
        invited.add(username)
    return history.bulk_create(
        Invitation, [Invitation(study=study, username=username, created_by=created_by) for username in cleaned.values()]
    )


@transaction.atomic
def measurements_add_new(*, study: Study, measurements: list[dict[str, Any]]) -> int:
    """``measurements_set`` for a study that has no measurements yet (an
    import's): the same checks and messages, then the rows are inserted
    without building a model instance each. On PostgreSQL one INSERT from
    arrays (fifty thousand rows cost ~2.5 s of Python through
    ``bulk_create``, ~0.1 s this way); elsewhere ``bulk_create``. Returns
    the number of rows written."""
    if not isinstance(measurements, (list, tuple)):
        raise InvalidInput({"measurements": "must be a list of {candidate, metric, value}"})
    study = locked(study)
    if Measurement.objects.filter(study=study).exists():
        raise InvalidInput({"measurements": "the study has measurements already: set them with measurements_set"})
    rows = _measurement_rows(study, measurements)
    if not rows:
        return 0
    # A new row's standard error: the one given, else none.
    errors = [None if error is KEEP else error for _, error in rows.values()]
    if connection.vendor != "postgresql":
        Measurement.objects.bulk_create(
            [
                Measurement(study_id=study.pk, candidate_id=c, metric_id=m, value=v, standard_error=e)
                for ((c, m), (v, _)), e in zip(rows.items(), errors, strict=True)
            ],
        )
    else:
        table = connection.ops.quote_name(Measurement._meta.db_table)
        candidates, metrics = zip(*rows, strict=True)
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} (study_id, candidate_id, metric_id, value, standard_error) "  # noqa: S608 (names, not input)
                "SELECT %s, * FROM UNNEST(%s::bigint[], %s::bigint[], %s::double precision[], %s::double precision[])",
                [study.pk, list(candidates), list(metrics), [v for v, _ in rows.values()], errors],
            )
    # Their history: one INSERT ... SELECT, however many rows.
    history.record_query(Measurement.objects.filter(study=study), "+", study_id=study.pk)
    return len(rows)
