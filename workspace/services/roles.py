"""Who may make a change: the one role check of the pages, the API, the
commands and the tasks (issue 30, item 4). A service that needs a role takes
the acting user and calls ``require_role``; the pages and the API call it
too before they show a form or read a body, with the same message."""

from collections.abc import Iterable

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser

from ..errors import RoleRequired
from ..models import Membership, Study

# "Only the … of this study can <action>."
_WHO = {Membership.Role.DESIGNER: "the designer", Membership.Role.EXPERT: "the experts"}


def roles_of(*, study: Study, user: AbstractBaseUser | AnonymousUser | None) -> set[str]:
    """The user's roles in the study: from ``my_memberships`` where a
    selector prefetched them (the pages' and the API's study), else one
    query."""
    if user is None or not user.is_authenticated:
        return set()
    prefetched: Iterable[Membership] | None = getattr(study, "my_memberships", None)
    if prefetched is not None:
        # The prefetch is the requesting user's: kept only if it is this user's.
        return {membership.role for membership in prefetched if membership.user_id == user.pk}
    return set(Membership.objects.filter(study=study, user_id=user.pk).values_list("role", flat=True))


def require_role(*, study: Study, user: AbstractBaseUser | AnonymousUser | None, role: str, action: str) -> None:
    """``RoleRequired`` (403) unless ``user`` holds ``role`` in ``study``.
    ``action`` completes "Only the designer of this study can …"."""
    if role not in roles_of(study=study, user=user):
        raise RoleRequired(f"Only {_WHO[Membership.Role(role)]} of this study can {action}.")
