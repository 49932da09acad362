"""The discussion page: a thread per attribute and per metric, each with a
form to post in it. Forms post to the thread's own path and come back to the
thread's anchor; a refused post is shown on that thread's form."""

from typing import cast

from django.contrib.auth.decorators import login_required
from django.core.exceptions import ObjectDoesNotExist, PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from .. import selectors, services
from ..errors import InvalidInput
from ..forms.discussion import PostForm
from ..limits import DISCUSSION_POST_MAX_CHARS
from ..models import Metric, Post, QualityAttribute, Study
from .common import form_add_service_errors, require_designer, signed_in_user, study_for_member


def _discussion_url(study: Study, anchor: str = "") -> str:
    url = reverse("discussion", kwargs={"study_id": study.pk})
    return f"{url}#{anchor}" if anchor else url


def _section(study: Study, thread: selectors.Thread, bound: PostForm | None) -> dict:
    action = reverse(f"discussion_{thread.kind}", kwargs={"study_id": study.pk, "pk": thread.item.pk})
    form = bound if bound is not None else PostForm(prefix=thread.anchor, item=thread.item)
    return {"thread": thread, "form": form, "action": f"{action}#{thread.anchor}"}


def _render(request: HttpRequest, study: Study, bound: tuple[str, PostForm] | None = None) -> HttpResponse:
    """The page; ``bound``: the anchor of the thread whose form was just
    refused, and that form with its errors."""
    threads = selectors.discussion_get(study=study)
    anchor, form = bound if bound is not None else ("", None)

    def sections(kind: str) -> list[dict]:
        return [_section(study, t, form if t.anchor == anchor else None) for t in threads[kind]]

    context = {
        "study": study,
        "study_tab": "discussion",
        "groups": [("Attributes", sections("attributes")), ("Metrics", sections("metrics"))],
        "post_count": sum(len(t.posts) for kind in ("attributes", "metrics") for t in threads[kind]),
        "max_chars": DISCUSSION_POST_MAX_CHARS,
        # Selected or not means something once voting has closed.
        "selection_fixed": services.selection_fixed(study),
    }
    return render(request, "discussion/discussion.html", context)


@login_required
@require_GET
def discussion_page(request: HttpRequest, study_id: int) -> HttpResponse:
    return _render(request, study_for_member(request, study_id))


@login_required
@require_http_methods(["GET", "POST"])
def thread_post_page(request: HttpRequest, study_id: int, kind: str, pk: int) -> HttpResponse:
    """POST: add the user's post to the thread of an attribute or a metric.
    GET: the thread on the discussion page."""
    study = study_for_member(request, study_id)
    try:
        item = selectors.discussion_item_get(study=study, kind=kind, pk=pk)
    except ObjectDoesNotExist:
        raise Http404(f"No such {kind} in this study.") from None
    anchor = f"{kind}-{item.pk}"
    if request.method == "GET":
        return redirect(_discussion_url(study, anchor))
    form = PostForm(request.POST, prefix=anchor, item=item)
    if form.is_valid():
        try:
            services.post_add(
                study=study,
                author=signed_in_user(request),
                body=form.cleaned_data["body"],
                attribute=item if isinstance(item, QualityAttribute) else None,
                metric=item if isinstance(item, Metric) else None,
            )
        except InvalidInput as error:
            form_add_service_errors(form, error)
        else:
            return redirect(_discussion_url(study, anchor))
    return _render(request, study, bound=(anchor, form))


def _post_or_404(study: Study, pk: int) -> Post:
    try:
        return selectors.post_get(study=study, pk=pk)
    except Post.DoesNotExist:
        raise Http404("No such post in this study.") from None


@login_required
@require_http_methods(["GET", "POST"])
def post_edit_page(request: HttpRequest, study_id: int, pk: int) -> HttpResponse:
    """Change one's own post: the form with the current text, then back to
    the post in its thread."""
    study = study_for_member(request, study_id)
    post = _post_or_404(study, pk)
    if post.author_id != request.user.pk:
        raise PermissionDenied("Only its author can change a post. You can answer it in its thread instead.")
    if post.is_hidden:  # its body is not shown to its author any more
        raise PermissionDenied("The designer has hidden this post: it can no longer be changed.")
    item = cast(QualityAttribute | Metric, post.attribute or post.metric)  # a post is about one or the other
    data = request.POST if request.method == "POST" else None
    form = PostForm(data, item=item, initial={"body": post.body}, help_text=True)
    if form.is_bound and form.is_valid():
        try:
            services.post_edit(post=post, body=form.cleaned_data["body"])
        except InvalidInput as error:
            form_add_service_errors(form, error)
        else:
            return redirect(_discussion_url(study, f"post-{post.pk}"))
    context = {
        "study": study,
        "study_tab": "discussion",
        "post": post,
        "item": item,
        "form": form,
        "back": _discussion_url(study, post.thread_anchor),
    }
    return render(request, "discussion/post_edit.html", context)


@login_required
@require_POST
def post_visibility_page(request: HttpRequest, study_id: int, pk: int, hide: bool) -> HttpResponse:
    """The designer hides a post, or shows it again; back to the post."""
    study = study_for_member(request, study_id)
    require_designer(study, "hide or show posts")
    post = _post_or_404(study, pk)
    if hide:
        services.post_hide(post=post, by=signed_in_user(request))
    else:
        services.post_unhide(post=post)
    return redirect(_discussion_url(study, f"post-{post.pk}"))
