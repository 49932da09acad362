"""The discussion through the API: a thread per attribute and per metric.

Members read every thread and post in any of them; an author changes their
own post; the designer hides and unhides posts. A hidden post keeps its place
in the thread; its body is sent to the designer only (``null`` for the
others, who read ``hidden: true``).
"""

from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from workspace import limits, selectors, services
from workspace.models import Membership, Metric, Post, QualityAttribute

from .idempotency import idempotent
from .serializers import StrictCharField, WriteSerializer
from .views import StudyScoped, location, validated

# --- payloads --------------------------------------------------------------------


class PostSerializer(serializers.Serializer):
    """A post in a thread. The body of a hidden post is null unless you are
    the study's designer."""

    # context["designer"]: whether the requesting member designs the study.

    id = serializers.IntegerField()
    author = StrictCharField(source="author.username")
    author_is_designer = serializers.SerializerMethodField(help_text="the author designs the study")
    body = serializers.SerializerMethodField(help_text="null when the post is hidden and you are not the designer")
    created_at = serializers.DateTimeField()
    edited_at = serializers.DateTimeField(allow_null=True, help_text="when the author last changed it; null if never")
    hidden = serializers.BooleanField(source="is_hidden", help_text="hidden by the designer")
    hidden_at = serializers.DateTimeField(allow_null=True)
    hidden_by = StrictCharField(source="hidden_by.username", allow_null=True, default=None)

    def get_author_is_designer(self, post: Post) -> bool:
        return post.author_id == post.study.designer_id

    def get_body(self, post: Post) -> str | None:
        if post.is_hidden and not self.context.get("designer", False):
            return None
        return post.body


class ThreadSerializer(serializers.Serializer):
    kind = StrictCharField(help_text="`attribute` or `metric`")
    id = serializers.IntegerField(source="item.pk", help_text="the attribute's or metric's id")
    name = StrictCharField(source="item.name")
    attribute = serializers.SerializerMethodField(help_text="a metric's attribute; null for an attribute's thread")
    anchor = StrictCharField(help_text="the thread's anchor on the page /studies/{id}/discussion/")
    post_count = serializers.SerializerMethodField()
    posts = PostSerializer(many=True)

    def get_attribute(self, thread: selectors.Thread) -> str | None:
        return thread.item.attribute.name if isinstance(thread.item, Metric) else None

    def get_post_count(self, thread: selectors.Thread) -> int:
        return len(thread.posts)


class DiscussionSerializer(serializers.Serializer):
    attributes = ThreadSerializer(many=True, help_text="one thread per attribute, in the study's order")
    metrics = ThreadSerializer(many=True, help_text="one thread per metric, grouped by attribute")


class PostWriteSerializer(WriteSerializer):
    body = StrictCharField(
        max_length=limits.DISCUSSION_POST_MAX_CHARS,
        help_text=f"the text, trimmed; at most {limits.DISCUSSION_POST_MAX_CHARS} characters",
    )


class NoBodySerializer(WriteSerializer):
    """An action without parameters: any field sent is refused."""


# --- views ----------------------------------------------------------------------------


class DiscussionScoped(StudyScoped):
    schema_tag = "discussion"

    def is_designer(self) -> bool:
        return Membership.Role.DESIGNER in self.roles()

    def with_study(self, posts: list[Post]) -> list[Post]:
        # The serializer compares each author with the study's designer: the
        # study is already loaded, so no post reads it again.
        for post in posts:
            post.study = self.study()
        return posts

    def post_data(self, post: Post) -> dict[str, Any]:
        self.with_study([post])
        return PostSerializer(post, context={"designer": self.is_designer()}).data

    def post_obj(self) -> Post:
        try:
            return selectors.post_get(study=self.study(), pk=self.kwargs["pk"])
        except Post.DoesNotExist:
            raise exceptions.NotFound("No such post in this study.") from None


class DiscussionView(DiscussionScoped, APIView):
    @extend_schema(summary="List the study's discussion threads", responses=DiscussionSerializer)
    def get(self, request: Request, study_id: int) -> Response:
        """Every thread of the study, one per attribute and per metric, each
        with its posts, oldest first."""
        threads = selectors.discussion_get(study=self.study())
        for thread in (*threads["attributes"], *threads["metrics"]):
            self.with_study(thread.posts)
        return Response(DiscussionSerializer(threads, context={"designer": self.is_designer()}).data)


class ThreadView(DiscussionScoped, APIView):
    kind = ""

    def item(self) -> QualityAttribute | Metric:
        try:
            return selectors.discussion_item_get(study=self.study(), kind=self.kind, pk=self.kwargs["pk"])
        except (QualityAttribute.DoesNotExist, Metric.DoesNotExist):
            raise exceptions.NotFound(f"No such {self.kind} in this study.") from None

    def get(self, request: Request, study_id: int, pk: int) -> Response:
        thread = selectors.thread_of(study=self.study(), item=self.item())
        self.with_study(thread.posts)
        return Response(ThreadSerializer(thread, context={"designer": self.is_designer()}).data)

    @idempotent
    def post(self, request: Request, study_id: int, pk: int) -> Response:
        item = self.item()
        data = validated(PostWriteSerializer, request.data)
        post = services.post_add(
            study=self.study(),
            author=self.member(),
            body=data["body"],
            attribute=item if isinstance(item, QualityAttribute) else None,
            metric=item if isinstance(item, Metric) else None,
        )
        return Response(
            self.post_data(post),
            status=status.HTTP_201_CREATED,
            headers=location(request, "discussion-post", study_id=study_id, pk=post.pk),
        )


def thread_schema(kind: str, article: str) -> Callable[[type[ThreadView]], type[ThreadView]]:
    return extend_schema_view(
        get=extend_schema(
            summary=f"Get the thread of {article} {kind}",
            responses=ThreadSerializer,
            description=f"The {kind}'s posts, oldest first.",
        ),
        post=extend_schema(
            summary=f"Post in the thread of {article} {kind}",
            request=PostWriteSerializer,
            responses={201: PostSerializer},
            description=f"Add your post to the {kind}'s thread (any member, in any phase).",
        ),
    )


@thread_schema("attribute", "an")
class AttributeThreadView(ThreadView):
    kind = "attribute"


@thread_schema("metric", "a")
class MetricThreadView(ThreadView):
    kind = "metric"


class PostDetailView(DiscussionScoped, APIView):
    @extend_schema(summary="Get one post of the study's discussion", responses=PostSerializer)
    def get(self, request: Request, study_id: int, pk: int) -> Response:
        """One post of the study's discussion (a hidden post's ``body`` is
        null for everyone but the designer)."""
        return Response(self.post_data(self.post_obj()))

    @extend_schema(summary="Edit your own post", request=PostWriteSerializer, responses=PostSerializer)
    def put(self, request: Request, study_id: int, pk: int) -> Response:
        """Replace the body of your own post; it is then marked edited. A post
        the designer has hidden can no longer change (400)."""
        post = self.post_obj()
        if post.author_id != request.user.pk:
            raise exceptions.PermissionDenied("Only its author can change a post.")
        data = validated(PostWriteSerializer, request.data)
        return Response(self.post_data(services.post_edit(post=post, body=data["body"])))


class PostHideView(DiscussionScoped, APIView):
    @extend_schema(summary="Hide a post", request=None, responses=PostSerializer)
    def post(self, request: Request, study_id: int, pk: int) -> Response:
        """Hide a post from everyone but you (designer). Hiding a hidden post
        changes nothing."""
        self.require_designer("hide posts")
        post = self.post_obj()
        validated(NoBodySerializer, request.data)
        return Response(self.post_data(services.post_hide(post=post, by=self.member())))


class PostUnhideView(DiscussionScoped, APIView):
    @extend_schema(summary="Show a hidden post again", request=None, responses=PostSerializer)
    def post(self, request: Request, study_id: int, pk: int) -> Response:
        """Show a hidden post to every member again (designer)."""
        self.require_designer("unhide posts")
        post = self.post_obj()
        validated(NoBodySerializer, request.data)
        return Response(self.post_data(services.post_unhide(post=post)))
