"""The lists' pagination: DRF's page numbers, with the ``page`` and
``page_size`` parameters checked (issue 17, finding 8; issue 18).

- ``page``: an empty value, one given more than once, or anything but a
  whole number from 1 (or ``last``) is a 400 naming ``page`` and saying why;
  DRF took an empty one for page 1 and a repeated one for its last value. A
  page past the end stays a 404 ("Invalid page.").
- ``page_size``: how many items a page holds, a whole number from 1 to
  ``limits.PAGE_SIZE_MAX``; left out, ``PAGE_SIZE`` (REST_FRAMEWORK). The same
  refusals as ``page``, and over the maximum is a 400 too (not clamped: a
  client asking for more than it gets would think it had everything).
"""

import re
from typing import Any

from django.core.paginator import Paginator
from rest_framework import exceptions
from rest_framework.pagination import PageNumberPagination
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from workspace import limits

_WHOLE_NUMBER = re.compile(r"[0-9]+")


def _single(request: Request, name: str) -> str | None:
    """The parameter's one value, None when left out; a 400 when repeated."""
    values = request.query_params.getlist(name)
    if not values:
        return None
    if len(values) > 1:
        raise exceptions.ValidationError({name: [f"must be given once, got {len(values)} values"]})
    return values[0]


class StrictPageNumberPagination(PageNumberPagination):
    page_size_query_param = "page_size"
    max_page_size = limits.PAGE_SIZE_MAX
    page_size_query_description = (
        f"How many items a page holds: from 1 to {limits.PAGE_SIZE_MAX} (default {api_settings.PAGE_SIZE})."
    )

    def get_page_number(self, request: Request, paginator: Paginator) -> int:
        name = self.page_query_param
        value = _single(request, name)
        if value is None:
            return 1
        if value in self.last_page_strings:
            return paginator.num_pages
        if not value:
            raise exceptions.ValidationError({name: ["must not be empty: a page number from 1, or leave it out"]})
        if not _WHOLE_NUMBER.fullmatch(value) or int(value) < 1:
            raise exceptions.ValidationError({name: [f"must be a whole number from 1, got {value!r}"]})
        return int(value)

    def get_page_size(self, request: Request) -> int | None:
        name = self.page_size_query_param
        value = _single(request, name)
        if value is None:
            return self.page_size
        if not _WHOLE_NUMBER.fullmatch(value) or not 1 <= int(value) <= self.max_page_size:
            raise exceptions.ValidationError(
                {name: [f"must be a whole number from 1 to {self.max_page_size} (the maximum), got {value!r}"]}
            )
        return int(value)

    def get_schema_operation_parameters(self, view: APIView) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"] = {"type": "integer", "minimum": 1, "maximum": self.max_page_size}
            elif parameter["name"] == self.page_query_param:
                # What get_page_number takes (and ``last``, in the description): 0 is a 400.
                parameter["schema"] = {"type": "integer", "minimum": 1}
                parameter["description"] = "A page number from 1, or `last`."
        return parameters
