"""The Content-Security-Policy header (settings.CONTENT_SECURITY_POLICY).

Every response carries it, pages, API answers, errors and static files alike:
a browser that opens a JSON answer or an uploaded file as a page must not run
script injected into it either.
"""

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # A view that needs a stricter policy may set its own.
        response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        return response
