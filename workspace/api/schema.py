"""OpenAPI: every operation documents the errors it can answer with."""

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse
from rest_framework.settings import api_settings

from .serializers import ErrorDetailSerializer

VALIDATION_ERROR = OpenApiResponse(
    response={
        "type": "object",
        "additionalProperties": {"type": "array", "items": {"type": "string"}},
        "description": "errors per field: a dotted path (e.g. `weights.Accuracy`) → messages",
        "example": {"peer_weights.clinician": ["row sums to 0.9, must be 1"]},
    },
    description="Invalid input: errors per field. Nothing was written.",
)


def _detail(description):
    return OpenApiResponse(response=ErrorDetailSerializer, description=description)


class ApproveAutoSchema(AutoSchema):
    def _get_paginator(self):
        # Views built on PaginatedListMixin paginate their GET lists by hand
        # (they are APIViews, without a pagination_class): document the
        # {count, next, previous, results} envelope and the page parameter.
        if self.method == "GET" and getattr(self.view, "paginated_list", False):
            return api_settings.DEFAULT_PAGINATION_CLASS()
        return super()._get_paginator()

    def _get_response_bodies(self, direction="response"):
        # The success responses come from the view or its @extend_schema
        # (which replaces get_response_serializers, so the errors cannot be
        # added there); the error responses are added here, for every view.
        bodies = super()._get_response_bodies(direction)
        for code, response in self.error_responses().items():
            if str(code) not in bodies:
                bodies[str(code)] = self._get_response_for_code(response, str(code), direction=direction)
        return bodies

    def error_responses(self):
        """The errors this operation can answer with (FORMATS.md, REST API)."""
        responses = {}
        writes = self.method in ("POST", "PUT", "PATCH", "DELETE")
        if writes:
            responses[400] = VALIDATION_ERROR
        if self.get_auth():
            responses[401] = _detail("Not authenticated.")
            responses[403] = _detail("Authenticated, but this role may not do it (or CSRF failed).")
        if "{" in self.path:
            responses[404] = _detail("Not found, or not a member of the study (its existence is never revealed).")
        elif self._get_paginator() is not None:
            responses[404] = _detail("No such page of the list.")
        # Phases belong to studies (an import's phase problems are 400s).
        if (writes and "{study_id}" in self.path) or self.path.endswith(("/results/", "/scores/")):
            responses[409] = _detail("The study's phase (or the run's status) does not allow it; the detail says why.")
        return responses
