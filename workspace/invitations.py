"""Consent: nobody becomes an expert of a study, or has inputs counted in
their name, without saying yes (issue 11, item 4).

- The designer adding someone else creates an ``Invitation`` addressed to
  the username, never a membership. The account is not even looked up, so the
  answer (and the work behind it) is the same whether or not it exists.
- A link invitation (no username) is accepted by whoever holds its key: the
  key is shown once, only its SHA-256 digest is stored; single use, expiring,
  revocable.
- A link may be addressed to an e-mail address (issue 32): the key is not
  shown to the designer but mailed to that address (notifications), and the
  account that confirmed the address (by its link, or single sign-on's
  verified address) sees the invitation among its own and accepts it there
  without the key. Joining with the mailed key confirms the address.
- An import by a staff user may carry other experts' inputs: each of them
  gets a *pending* membership marked ``inputs_imported_by`` and an invitation
  pointing at it. A pending membership does not make the study theirs
  (``selectors.studies_visible_to``), and its inputs do not count (closing the
  vote or the assessment is refused naming them) until they accept, which
  confirms the inputs. Declining deletes the membership with those inputs.
- An import by anyone else writes nothing in another person's name and
  creates no account: the other experts become invitations, and the inputs
  the bundle holds for them are left out (the study is then imported as a
  draft, ``workspace.bundles``), so a designer imports their own download
  as a copy.
- Command-line imports (``importer=None``: the operator with shell access)
  are trusted as before: active memberships, inputs counted.

Services are keyword-only and atomic; who may call them (the designer, the
addressee) is checked by the API, as everywhere.
"""

import hashlib
import secrets
from typing import NoReturn, cast

from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.models import User as AuthUser  # for annotations: User below is get_user_model()'s
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q, QuerySet
from django.utils import timezone

from . import history, selectors, services
from .errors import InvalidInput, PhaseConflict
from .events import event_publish
from .extensions import EXPERT_INPUTS
from .models import Invitation, Membership, Study
from .services import _checks
from .services.accounts import (
    USERNAME_TAKEN,
    confirmed_email,
    email_clean,
    email_confirmed_set,
    username_clean,
    usernames_taken,
)
from .services.imports import invitations_create_many

User = get_user_model()
EXPERT, PENDING, ACTIVE = Membership.Role.EXPERT, Membership.Status.PENDING, Membership.Status.ACTIVE
# The designer as the pages pass them: ``request.user`` behind login_required,
# never anonymous (hence the casts where a user is stored).
SignedIn = AuthUser | AnonymousUser


# --- link keys -------------------------------------------------------------------


def _digest(key: str) -> str:
    # surrogatepass: a key from JSON may hold a lone surrogate; it matches nothing.
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


# --- the designer: invite, revoke ------------------------------------------------


@transaction.atomic
def invitation_create(
    *, study: Study, created_by: SignedIn, username: str | None = None, email: object = None
) -> tuple[Invitation, str | None]:
    """Invite ``username`` to be an expert of the study (draft phase), or,
    without a username, create a link invitation, addressed to ``email``
    when given. Returns ``(invitation, key)``; ``key`` (links the designer
    hands over only) is not stored and cannot be shown again; a link
    addressed to an e-mail address returns None: its key is in the mail."""
    study = _checks.locked(study)
    services.require_phase(study, services.Action.INVITE_EXPERT)
    if email is not None:
        return _email_invitation_create(study, created_by, email)
    if username is None:
        key = secrets.token_urlsafe(24)
        link = Invitation.objects.create(study=study, digest=_digest(key), created_by=cast(AuthUser, created_by))
        _created_publish(link, key)
        return link, key
    username = username_clean(username=username)
    # Both checks look at this study only, whether or not the account exists.
    if Membership.objects.filter(study=study, role=EXPERT, user__username=username).exists():
        raise InvalidInput({"username": f"{username} is already an expert of this study"})
    if (
        Invitation.objects.filter(study=study, username=username, status=Invitation.Status.PENDING)
        .filter(expires_at__gt=timezone.now())
        .exists()
    ):
        raise InvalidInput({"username": f"{username} is already invited to this study"})
    invitation = Invitation.objects.create(study=study, username=username, created_by=cast(AuthUser, created_by))
    _created_publish(invitation, None)
    return invitation, None


def _email_invitation_create(study: Study, created_by: SignedIn, email: object) -> tuple[Invitation, None]:
    address = email_clean(email=email)
    if not address:
        raise InvalidInput({"email": "must be the e-mail address to send the invitation to"})
    pending = Invitation.objects.filter(study=study, email__iexact=address, status=Invitation.Status.PENDING)
    if pending.filter(expires_at__gt=timezone.now()).exists():
        raise InvalidInput({"email": f"{address} is already invited to this study"})
    key = secrets.token_urlsafe(24)
    invitation = Invitation.objects.create(
        study=study, digest=_digest(key), email=address, created_by=cast(AuthUser, created_by)
    )
    _created_publish(invitation, key)
    return invitation, None


def _created_publish(invitation: Invitation, key: str | None) -> None:
    """Publish ``invitation.created``: the username invited, or for a link
    addressed to an e-mail address the address and the link's ``key``,
    which only the mail to that address carries (a plain link invitation is
    told to nobody: the designer hands its key over)."""
    email = invitation.email or None
    event_publish(
        "invitation.created",
        study_id=invitation.study_id,
        actor_id=invitation.created_by_id,
        invitation_id=invitation.pk,
        username=invitation.username,
        email=email,
        **({"key": key} if email and key else {}),
    )


@transaction.atomic
def member_add(*, study: Study, added_by: SignedIn, username: str) -> Membership | Invitation:
    """The members endpoint: the designer naming themself takes the expert
    role at once (their own explicit choice); anyone else is invited."""
    username = username_clean(username=username)
    if username == added_by.get_username():
        return services.expert_add(study=study, user=cast(AuthUser, added_by))  # signed in: the designer
    return invitation_create(study=study, created_by=added_by, username=username)[0]


def _closed_message(invitation: Invitation) -> str | None:
    """Why the invitation can no longer be answered, or None."""
    if invitation.status == Invitation.Status.ACCEPTED:
        return "this invitation link has already been used" if invitation.is_link else "this invitation is accepted"
    if invitation.status == Invitation.Status.DECLINED:
        return "this invitation was declined"
    if invitation.status == Invitation.Status.REVOKED:
        return "this invitation was revoked by the study's designer"
    return None


def invitation_refusal(invitation: Invitation) -> str | None:
    """Why the invitation cannot be accepted (answered, revoked or
    expired), or None: what accepting refuses and the link's page shows."""
    message = _closed_message(invitation)
    if message is None and invitation.is_expired:
        message = (
            f"this invitation expired on {invitation.expires_at:%Y-%m-%d %H:%M} UTC; "
            "ask the study's designer for a new one"
        )
    return message


def _refuse(message: str, field: str | None, code: str = "invitation_closed") -> NoReturn:
    if field is None:
        raise PhaseConflict(message[0].upper() + message[1:] + ".", code=code)
    raise InvalidInput({field: message})


def _relock(invitation: Invitation) -> Invitation:
    _checks.locked(invitation.study)
    # of=self: PostgreSQL cannot lock the nullable side of the outer join to membership.
    locking = Invitation.objects.select_for_update(of=("self",))
    return locking.select_related("study", "membership__user").get(pk=invitation.pk)


def _close(invitation: Invitation, status: str, field: str | None = None) -> None:
    """Decline or revoke: a pending membership goes, with its imported inputs."""
    invitation = _relock(invitation)
    message = _closed_message(invitation)
    if message is not None:
        _refuse(message, field)
    membership = invitation.membership
    invitation.status, invitation.decided_at, invitation.membership = status, timezone.now(), None
    invitation.save(update_fields=["status", "decided_at", "membership"])
    if membership is not None and membership.status == PENDING:
        history.delete(Membership.objects.filter(pk=membership.pk))


@transaction.atomic
def invitation_revoke(*, invitation: Invitation) -> None:
    """The designer withdraws a pending invitation (any phase); a pending
    membership it points at is deleted with its imported inputs."""
    _close(invitation, Invitation.Status.REVOKED)


# --- the invited person: accept, decline -----------------------------------------


def _inputs_of(membership: Membership) -> dict | None:
    """The membership's inputs in bundle shape, with its answers to the
    elicited metrics (``elicitation_answers``: ``{metric: codes}``, a bundle's
    ``elicited_metrics.<metric>.answers.<expert>``), or None when it has none."""
    section = selectors.expert_inputs_list(study=membership.study, experts=[membership])[membership.user.get_username()]
    # The apps above add theirs (evaluation: "elicitation_answers").
    for key, read in EXPERT_INPUTS.items():
        section[key] = read(expert=membership)
    has_any = (
        section["votes"]["attributes"]
        or section["votes"]["metrics"]
        or any(section[key] for key in ("priorities", "ranges", "peer_weights", *EXPERT_INPUTS))
    )
    return section if has_any else None


@transaction.atomic
def invitation_accept(
    *, invitation: Invitation, user: AuthUser, confirm_inputs: bool = False, field: str | None = None
) -> Membership:
    """``user`` accepts: a pending membership becomes active and its imported
    inputs confirmed (any phase; ``confirm_inputs`` must be true when there
    are inputs), otherwise a new expert membership is created (draft phase,
    the rule for adding an expert). Refusals name ``field`` when given (the
    link's ``key``); otherwise they are conflicts."""
    invitation = _relock(invitation)
    message = invitation_refusal(invitation)
    if message is not None:
        _refuse(message, field)
    now = timezone.now()
    membership = invitation.membership
    if membership is not None:
        if _inputs_of(membership) is not None:
            if confirm_inputs is not True:
                by = membership.inputs_imported_by
                importer = by.get_username() if by else "someone else"
                raise InvalidInput(
                    {
                        "confirm_inputs": f"must be true: {importer} imported inputs in your name; look them over "
                        "(the invitation's inputs) and confirm them to accept, or decline"
                    }
                )
            membership.inputs_confirmed_at = now
        membership.status = ACTIVE
        membership.save(update_fields=["status", "inputs_confirmed_at"])
    else:
        if Membership.objects.filter(study=invitation.study, user=user, role=EXPERT).exists():
            _refuse("you are already an expert of this study", field, code="already_expert")
        services.require_phase(invitation.study, services.Action.JOIN_AS_EXPERT)
        membership = services.expert_add(study=invitation.study, user=user)
    invitation.status, invitation.decided_at = Invitation.Status.ACCEPTED, now
    invitation.accepted_by, invitation.membership = user, membership
    invitation.save(update_fields=["status", "decided_at", "accepted_by", "membership"])
    return membership


@transaction.atomic
def invitation_accept_link(*, key: object, user: AuthUser) -> Membership:
    """Accept the link invitation whose key is ``key``; every refusal names
    ``key`` (unknown, used, revoked, expired) except the study's phase (409)."""
    if not isinstance(key, str) or not key:
        raise InvalidInput({"key": "must be the invitation's key"})
    invitation = Invitation.objects.filter(digest=_digest(key)).first()
    if invitation is None:
        raise InvalidInput(
            {"key": "no invitation has this key: check the link, or ask the study's designer for a new one"}
        )
    return invitation_accept(invitation=invitation, user=user, field="key")


@transaction.atomic
def invitation_accept_with_signup(*, key: object, username: object, password: str, email: object = "") -> Membership:
    """A new person joins through a link: their account (``username``,
    ``password``, checked by the password validators, and an optional
    ``email`` for reminders and password resets) is created and the
    invitation accepted in one transaction, so a refused key creates no
    account and a taken username uses no key. Refusals name ``username``,
    ``password``, ``email`` or ``key``."""
    username = username_clean(username=username)
    # Taken also by a look-alike (case, width: ``username_key``), which the
    # log-in would confuse with it.
    if usernames_taken(usernames=[username]):
        raise InvalidInput({"username": USERNAME_TAKEN})
    address = email_clean(email=email)
    addressed = invitation_get_by_key(key=key) if isinstance(key, str) else None
    # The key came in the mail to the invitation's address: that proves it.
    proven = addressed.email if addressed is not None and addressed.email else ""
    if proven and not address:
        address = proven
    user = User(username=username, email=address)
    try:
        password_validation.validate_password(password, user)
    except ValidationError as error:
        raise InvalidInput({"password": error.messages}) from None
    user.set_password(password)
    user.save()
    membership = invitation_accept_link(key=key, user=user)
    if proven and address.lower() == proven.lower():
        email_confirmed_set(user=user, email=address)
    return membership


@transaction.atomic
def invitation_decline(*, invitation: Invitation) -> None:
    """The addressee declines: a pending membership goes with its imported
    inputs, so nothing of theirs stays in the study."""
    _close(invitation, Invitation.Status.DECLINED)


# --- imports -----------------------------------------------------------------------


def _input_paths(bundle: dict, username: str) -> list[str]:
    """The bundle paths holding inputs of ``username`` (empty ones aside:
    an export lists every expert's votes, possibly none)."""
    votes = bundle.get("votes")
    votes = votes if isinstance(votes, dict) else {}
    sections = {
        "votes.attributes": votes.get("attributes"),
        "votes.metrics": votes.get("metrics"),
        "priorities": bundle.get("priorities"),
        "ranges": bundle.get("ranges"),
        "peer_weights": bundle.get("peer_weights"),
    }
    # An elicited metric's answers (FORMATS.md): elicited_metrics.<metric>.answers.
    elicited = bundle.get("elicited_metrics")
    for name, entry in elicited.items() if isinstance(elicited, dict) else ():
        sections[f"elicited_metrics.{name}.answers"] = entry.get("answers") if isinstance(entry, dict) else None
    return [
        path
        for path, section in sections.items()
        if isinstance(section, dict) and username in section and section[username] not in (None, [], {})
    ]


def _without(section: object, names: list[str]) -> object:
    """A per-expert section without ``names`` (other shapes are left for the
    importer's checks to refuse)."""
    if not isinstance(section, dict):
        return section
    return {name: value for name, value in section.items() if name not in names}


def import_bundle_consented(*, bundle: dict, experts: list[str], importer: AuthUser | None) -> tuple[dict, list[str]]:
    """The bundle as an import by ``importer`` may write it, and the other
    experts whose inputs it leaves out, in the bundle's order. Staff and
    the command line (``importer`` None) write every section and leave
    nothing out. Anyone else writes no other person's inputs: their
    sections are dropped (the experts are invited instead) and those who
    had any are named, for the importer to be told."""
    if importer is None or importer.is_staff:
        return bundle, []
    me = importer.get_username()
    others = [name for name in experts if name != me]
    left_out = [name for name in others if _input_paths(bundle, name)]
    consented = dict(bundle)
    if isinstance(bundle.get("votes"), dict):
        consented["votes"] = {kind: _without(section, others) for kind, section in bundle["votes"].items()}
    for key in ("priorities", "ranges", "peer_weights"):
        consented[key] = _without(bundle.get(key), others)
    if isinstance(bundle.get("elicited_metrics"), dict):
        consented["elicited_metrics"] = {
            name: {**entry, "answers": _without(entry["answers"], others)}
            if isinstance(entry, dict) and "answers" in entry
            else entry
            for name, entry in bundle["elicited_metrics"].items()
        }
    return consented, left_out


INPUTS_LEFT_OUT = "only staff can import inputs entered by someone else"


def import_experts(*, study: Study, usernames: list[str], importer: AuthUser | None) -> dict[str, Membership]:
    """The bundle's experts as ``{username: membership}``, for those the
    import may write inputs for: the importer (their own), and everyone when
    the importer is staff (pending, marked imported by them, each with an
    invitation) or the command line (active, as entered). A non-staff
    importer's fellow experts become invitations only: no account, no
    membership."""
    me = importer.get_username() if importer is not None else None
    if importer is None or importer.is_staff:
        return _import_experts_trusted(study=study, usernames=usernames, importer=importer)
    # The others are invited in one INSERT, as invitation_create would one at a time.
    others = {f"experts[{position}]": username for position, username in enumerate(usernames) if username != me}
    for invitation in invitations_create_many(study=study, created_by=importer, usernames=others):
        _created_publish(invitation, None)
    return {me: services.expert_add(study=study, user=importer)} if me in usernames else {}


def _import_experts_trusted(*, study: Study, usernames: list[str], importer: AuthUser | None) -> dict[str, Membership]:
    """``import_experts`` for staff and the command line, in a number of
    queries that does not grow with the experts, refused as one expert at a
    time would be: the first malformed username, or the first one naming an
    expert already added."""
    me = importer.get_username() if importer is not None else None
    names = _usernames_cleaned(usernames, me)
    others = [name for name in names if name != me]
    fields = [f"experts[{position}]" for position, name in enumerate(names) if name != me]
    accounts = dict(zip(others, services.users_get_or_create(usernames=others, fields=fields), strict=True))
    if me is not None:
        accounts[me] = cast(AuthUser, importer)  # me is set: the importer's username
    memberships = services.experts_add(study=study, users=[accounts[name] for name in names])
    experts = dict(zip(usernames, memberships, strict=True))
    if importer is not None:
        _imported_invite(study, [membership for username, membership in experts.items() if username != me], importer)
    return experts


def _usernames_cleaned(usernames: list[str], me: str | None) -> list[str]:
    """The usernames checked and cleaned (the importer's own kept as it is),
    up to and including the first one given twice, which ``experts_add``
    refuses before any later username is looked at."""
    names, seen = [], set()
    for position, username in enumerate(usernames):
        name = username if username == me else username_clean(username=username, field=f"experts[{position}]")
        names.append(name)
        if name in seen:
            break  # experts_add refuses it, before any later username is looked at
        seen.add(name)
    return names


def _imported_invite(study: Study, imported: list[Membership], importer: AuthUser) -> None:
    """The imported experts (not the importer) made pending, with the
    inputs the importer brought, each with an invitation to accept them."""
    for membership in imported:
        membership.status, membership.inputs_imported_by = PENDING, importer
    history.bulk_update(Membership, imported, ["status", "inputs_imported_by"])
    created = history.bulk_create(
        Invitation,
        [
            Invitation(study=study, username=membership.user.get_username(), membership=membership, created_by=importer)
            for membership in imported
        ],
    )
    for invitation in created:
        _created_publish(invitation, None)


# --- reads -------------------------------------------------------------------------


def invitation_list(*, study: Study) -> QuerySet[Invitation]:
    """A study's invitations, newest first (the designer's list)."""
    return (
        Invitation.objects.filter(study=study)
        .select_related("created_by", "accepted_by", "membership__inputs_imported_by")
        .order_by("-created_at", "-id")
    )


def _addressed_to(user: AuthUser) -> Q:
    """The invitations addressed to ``user``: to the username, or to the
    e-mail address the account confirmed (``EmailConfirmation``: its link
    followed, or single sign-on's verified address), never an unconfirmed
    one, which anyone could type into their account."""
    addressed = Q(username=user.get_username())
    confirmed = confirmed_email(user=user)
    if confirmed:
        addressed |= Q(email__iexact=confirmed)
    return addressed


def invitation_list_for_user(*, user: AuthUser) -> QuerySet[Invitation]:
    """The pending invitations addressed to ``user``'s username or confirmed
    e-mail address (expired ones too, so a pending membership can still be
    declined), newest first."""
    return (
        Invitation.objects.filter(_addressed_to(user), status=Invitation.Status.PENDING)
        .select_related(
            "study__designer", "created_by", "membership__user", "membership__study", "membership__inputs_imported_by"
        )
        .order_by("-created_at", "-id")
    )


def invitation_get_for_user(*, user: AuthUser, pk: int) -> Invitation | None:
    """One invitation addressed to ``user`` (any status), or None."""
    return Invitation.objects.filter(_addressed_to(user), pk=pk).select_related("study").first()


def invitation_pending_for_email(*, email: str) -> bool:
    """Whether a study's invitation addressed to ``email`` waits, unexpired."""
    pending = Invitation.objects.filter(email__iexact=email, status=Invitation.Status.PENDING)
    return pending.filter(expires_at__gt=timezone.now()).exists()


def invitation_get_by_key(*, key: str) -> Invitation | None:
    """The invitation whose link key is ``key``, with its study and
    designer (one query), or None. Only the key's digest is stored."""
    if not key:
        return None
    return Invitation.objects.filter(digest=_digest(key)).select_related("study__designer").first()


def invitation_inputs(*, invitation: Invitation) -> dict | None:
    """What accepting would confirm: ``{"imported_by", "votes", "priorities",
    "ranges", "peer_weights", "elicitation_answers"}`` as they are saved, or None."""
    if invitation.membership is None or invitation.membership.status != PENDING:
        return None
    section = _inputs_of(invitation.membership)
    if section is None:
        return None
    importer = invitation.membership.inputs_imported_by
    return {"imported_by": importer.get_username() if importer else None, **section}
