"""What every page module shares: the study a page is about, scoped to the
user, and how a service's refusal reaches a form."""

from typing import TYPE_CHECKING, cast

from django import forms
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest

from .. import selectors
from ..errors import InvalidInput
from ..models import Membership, Study
from ..selectors.studies import MyMemberships
from ..services.roles import require_role

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


class MemberRoles(MyMemberships):
    member: User  # the signed-in user these roles are of
    my_roles: set[str]  # e.g. {"designer", "expert"}
    is_designer: bool
    is_expert: bool


# The study as every page has it: the user's roles in it set.
if TYPE_CHECKING:
    MemberStudy = WithAnnotations[Study, MemberRoles]


def signed_in_user(request: HttpRequest) -> User:
    """The user of a page behind ``login_required``: never anonymous there."""
    return cast(User, request.user)


def study_for_member(request: HttpRequest, study_id: int) -> "MemberStudy":
    """The study if the user is an (active) member, with ``my_roles`` set
    (e.g. ``{"designer", "expert"}``); 404 for anyone else, exactly as for a
    study that does not exist (PAGES.md: a study's existence is never
    revealed). Two queries."""
    try:
        study = cast("MemberStudy", selectors.study_get(study_id=study_id, user=request.user))  # roles set below
    except Study.DoesNotExist:
        raise Http404("No such study.") from None
    study.member = signed_in_user(request)
    study.my_roles = {membership.role for membership in study.my_memberships}
    study.is_designer = Membership.Role.DESIGNER in study.my_roles
    study.is_expert = Membership.Role.EXPERT in study.my_roles
    return study


def require_designer(study: "MemberStudy", action: str) -> None:
    """403 (with a page saying what the member can do instead) unless the
    user designs ``study`` (``workspace.services.roles.require_role``, the
    one role check). ``action`` completes "Only the designer of this study can …"."""
    require_role(study=study, user=study.member, role=Membership.Role.DESIGNER, action=action)


def require_expert(study: "MemberStudy", action: str) -> None:
    """The same for the experts: "Only the experts of this study can …"."""
    require_role(study=study, user=study.member, role=Membership.Role.EXPERT, action=action)


def form_add_service_errors(form: forms.BaseForm, error: InvalidInput) -> None:
    """A service's refusal shown on the form: each message under the field it
    names, messages about no field of the form above it."""
    for field, field_messages in error.errors.items():
        form.add_error(field if field in form.fields else None, list(field_messages))


def absent_how(expert: Membership) -> str:
    """How the designer has set an absent expert aside, worded for them:
    "excluded you from" or "marked you as abstaining in" (this study)."""
    return "marked you as abstaining in" if expert.absence == Membership.Absence.ABSTAINING else "excluded you from"
