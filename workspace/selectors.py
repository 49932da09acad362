"""Reads, always scoped to what the user may see.

An outsider never learns a study exists: every lookup goes through
``studies_visible_to`` so a study the user is not a member of is simply
"not found".
"""

from django.db.models import Prefetch

from .models import Membership, Metric, QualityAttribute, Study


def studies_visible_to(user):
    """Studies in which ``user`` is the designer or an expert; a pending
    membership (not yet accepted) does not count."""
    if not user.is_authenticated:
        return Study.objects.none()
    return Study.objects.filter(memberships__user=user, memberships__status=Membership.Status.ACTIVE).distinct()


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






def selected_attributes(study):
    """The attributes fixed by the vote, in the study's order (the columns of
    a prioritisation)."""
    return QualityAttribute.objects.filter(study=study, is_selected=True).order_by("position", "id")


def selected_metrics(study):
    """The metrics fixed by the vote, grouped by attribute in the study's
    order: the columns of W, L, U and M in every run."""
    return (
        Metric.objects.filter(study=study, is_selected=True)
        .select_related("attribute")
        .order_by("attribute__position", "attribute__id", "position", "id")
    )

