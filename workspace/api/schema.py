"""OpenAPI: every operation documents the errors it can answer with."""

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse

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
    def get_response_serializers(self):
        responses = super().get_response_serializers()
        if not isinstance(responses, dict):
            if self.method == "DELETE":
                code = 204
            elif self._is_create_operation():
                code = 201
            else:
                code = 200
            responses = {code: responses}
        responses = dict(responses)
        writes = self.method in ("POST", "PUT", "PATCH", "DELETE")
        authenticated = bool(self.get_auth())
        if writes:
            responses.setdefault(400, VALIDATION_ERROR)
        if authenticated:
            responses.setdefault(401, _detail("Not authenticated."))
            responses.setdefault(403, _detail("Authenticated, but this role may not do it (or CSRF failed)."))
        if "{" in self.path:
            responses.setdefault(404, _detail("Not found, or not a member of the study (its existence is never revealed)."))
        if writes or self.path.endswith(("/results/", "/scores/")):
            responses.setdefault(409, _detail("The study's phase (or the run's status) does not allow it; the detail says why."))
        return responses
