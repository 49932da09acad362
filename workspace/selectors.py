"""Reads, always scoped to what the user may see.

An outsider never learns a study exists: every lookup goes through
``studies_visible_to`` so a study the user is not a member of is simply
"not found".
"""

from django.db.models import Prefetch

from .models import Membership, Metric, Phase, QualityAttribute, Study


def studies_visible_to(user):
    """Studies in which ``user`` is the designer or an expert."""
    if not user.is_authenticated:
        return Study.objects.none()
    return Study.objects.filter(memberships__user=user).distinct()


def studies_with_my_roles(user):
    """The user's studies with their designers and, as ``my_memberships``,
    the user's own memberships: two queries however many studies."""
    return (
        studies_visible_to(user)
        .select_related("designer")
        .prefetch_related(
            Prefetch("memberships", queryset=Membership.objects.filter(user=user).order_by("role"), to_attr="my_memberships")
        )
        .order_by("-created_at", "-id")
    )


def study_for_user(*, user, study_id):
    """The study, or ``Study.DoesNotExist`` when it is missing *or* the user is
    not a member (the two are indistinguishable on purpose)."""
    return studies_visible_to(user).select_related("designer").get(pk=study_id)


def roles_of(*, user, study):
    """The set of roles (``designer``, ``expert``) the user holds in the study."""
    if not user.is_authenticated:
        return set()
    return set(Membership.objects.filter(study=study, user=user).values_list("role", flat=True))


def expert_membership(*, user, study):
    """The user's expert membership in the study, or None."""
    return Membership.objects.filter(study=study, user=user, role=Membership.Role.EXPERT).select_related("user").first()


def experts_of(study):
    """The study's expert memberships in a stable order (the order of k)."""
    return Membership.objects.filter(study=study, role=Membership.Role.EXPERT).select_related("user").order_by("id")


def selected_attributes(study):
    return QualityAttribute.objects.filter(study=study, is_selected=True).order_by("position", "id")


def selected_metrics(study):
    return (
        Metric.objects.filter(study=study, is_selected=True)
        .select_related("attribute")
        .order_by("attribute__position", "attribute__id", "position", "id")
    )


def attributes_with_metrics(study):
    return QualityAttribute.objects.filter(study=study).prefetch_related(
        Prefetch("metrics", queryset=Metric.objects.order_by("position", "id"))
    )


def selection_is_fixed(study):
    """Selection is fixed from the end of voting on."""
    return study.phase in (Phase.ASSESSMENT, Phase.CLOSED)
