"""The lists' pagination: DRF's page numbers, with the ``page`` parameter
checked (issue 17, finding 8). An empty value, one given more than once, or
anything but a whole number from 1 (or ``last``) is a 400 naming ``page``
and saying why; DRF took an empty one for page 1 and a repeated one for its
last value. A page past the end stays a 404 ("Invalid page."). The API has
no page size parameter: pages hold ``PAGE_SIZE`` items."""

import re

from rest_framework import exceptions
from rest_framework.pagination import PageNumberPagination

_WHOLE_NUMBER = re.compile(r"[0-9]+")


class StrictPageNumberPagination(PageNumberPagination):
    def get_page_number(self, request, paginator):
        values = request.query_params.getlist(self.page_query_param)
        if not values:
            return 1
        name = self.page_query_param
        if len(values) > 1:
            raise exceptions.ValidationError({name: [f"must be given once, got {len(values)} values"]})
        value = values[0]
        if value in self.last_page_strings:
            return paginator.num_pages
        if not value:
            raise exceptions.ValidationError({name: ["must not be empty: a page number from 1, or leave it out"]})
        if not _WHOLE_NUMBER.fullmatch(value) or int(value) < 1:
            raise exceptions.ValidationError({name: [f"must be a whole number from 1, got {value!r}"]})
        return int(value)
