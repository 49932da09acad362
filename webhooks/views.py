"""The webhooks pages (docs/pages.md, "Webhooks"): a study's webhooks, a
form to register one (its secret shown on that answer only), and each
webhook's page: its settings, a test delivery, a new secret, its delivery
log, deletion after a confirmation.

Designer only (403 for other members, 404 for anyone else). Each POST calls
one service of ``webhooks.services``; a refusal is shown on the form,
naming the field, with nothing written."""

from typing import TYPE_CHECKING, Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from workspace.errors import InvalidInput, PhaseConflict
from workspace.views.common import form_add_service_errors, require_designer, study_for_member

from . import selectors, services
from .forms import WebhookForm
from .models import Webhook

if TYPE_CHECKING:
    from workspace.views.common import MemberStudy

DELIVERIES_PER_PAGE = 25


def _designer_study(request: HttpRequest, study_id: int) -> "MemberStudy":
    study = study_for_member(request, study_id)
    require_designer(study, "manage the study's webhooks")
    return study


def _webhook(request: HttpRequest, study_id: int, webhook_id: int) -> tuple["MemberStudy", Webhook]:
    study = _designer_study(request, study_id)
    try:
        webhook = selectors.study_webhook_get(study=study, webhook_id=webhook_id)
    except Webhook.DoesNotExist:
        raise Http404("No such webhook.") from None
    return study, webhook


def _list_path(study: "MemberStudy") -> str:
    return f"/studies/{study.pk}/webhooks/"


def _path(webhook: Webhook) -> str:
    return f"/studies/{webhook.study_id}/webhooks/{webhook.pk}/"


def _secret_shown(response: HttpResponse) -> HttpResponse:
    """A page showing a secret must not linger in a cache or the browser's history."""
    response["Cache-Control"] = "no-store"
    return response


@login_required
@require_http_methods(["GET", "POST"])
def webhooks_page(request: HttpRequest, study_id: int) -> HttpResponse:
    """The study's webhooks and the form to register one; once registered,
    its secret (shown on this answer only)."""
    study = _designer_study(request, study_id)
    form = WebhookForm(request.POST if request.method == "POST" else None)
    created: Webhook | None = None
    if form.is_bound and form.is_valid():
        try:
            created = services.webhook_create(study=study, by=study.member, **form.cleaned_data)
        except InvalidInput as error:
            form_add_service_errors(form, error)
        except PhaseConflict as error:
            form.add_error(None, str(error))
        else:
            form = WebhookForm()
    context: dict[str, Any] = {
        "study": study,
        "study_tab": "webhooks",
        "form": form,
        "webhooks": selectors.webhook_rows(study=study),
        "secret_of": created,
    }
    response = render(request, "webhooks/webhooks.html", context)
    return _secret_shown(response) if created is not None else response


def _webhook_page(
    request: HttpRequest, study: "MemberStudy", webhook: Webhook, form: WebhookForm | None = None, secret: bool = False
) -> HttpResponse:
    deliveries = Paginator(selectors.delivery_list(webhook=webhook), DELIVERIES_PER_PAGE)
    context = {
        "study": study,
        "study_tab": "webhooks",
        "webhook": webhook,
        "form": form or WebhookForm(initial={"url": webhook.url, "events": webhook.events, "active": webhook.active}),
        "page": deliveries.get_page(request.GET.get("page")),
        "secret_of": webhook if secret else None,
    }
    response = render(request, "webhooks/webhook.html", context)
    return _secret_shown(response) if secret else response


@login_required
@require_http_methods(["GET", "POST"])
def webhook_page(request: HttpRequest, study_id: int, webhook_id: int) -> HttpResponse:
    """One webhook: its settings (POST changes them), the test and secret
    buttons, its delivery log newest first (``?page=``)."""
    study, webhook = _webhook(request, study_id, webhook_id)
    if request.method == "GET":
        return _webhook_page(request, study, webhook)
    form = WebhookForm(request.POST)
    if form.is_valid():
        try:
            services.webhook_update(webhook=webhook, **form.cleaned_data)
        except InvalidInput as error:
            form_add_service_errors(form, error)
        else:
            messages.success(request, "The webhook was saved.")
            return redirect(_path(webhook))
    webhook.refresh_from_db()
    return _webhook_page(request, study, webhook, form=form)


@login_required
@require_POST
def webhook_test(request: HttpRequest, study_id: int, webhook_id: int) -> HttpResponse:
    """Send a test delivery; its outcome appears in the log."""
    study, webhook = _webhook(request, study_id, webhook_id)
    try:
        services.webhook_test(webhook=webhook)
    except PhaseConflict as error:
        messages.error(request, str(error))
    else:
        messages.success(request, "A test delivery is on its way: reload the page to see how it went.")
    return redirect(_path(webhook))


@login_required
@require_POST
def webhook_rotate_secret(request: HttpRequest, study_id: int, webhook_id: int) -> HttpResponse:
    """A new secret, shown on this answer only."""
    study, webhook = _webhook(request, study_id, webhook_id)
    services.webhook_rotate_secret(webhook=webhook)
    return _webhook_page(request, study, webhook, secret=True)


@login_required
@require_http_methods(["GET", "POST"])
def webhook_delete(request: HttpRequest, study_id: int, webhook_id: int) -> HttpResponse:
    """Delete the webhook and its log: GET asks for confirmation, POST deletes."""
    study, webhook = _webhook(request, study_id, webhook_id)
    if request.method == "POST":
        services.webhook_delete(webhook=webhook)
        messages.success(request, f"The webhook to {webhook.url} was deleted.")
        return redirect(_list_path(study))
    count = selectors.delivery_list(webhook=webhook).count()
    return render(
        request,
        "webhooks/webhook_delete.html",
        {"study": study, "study_tab": "webhooks", "webhook": webhook, "deliveries": count},
    )
