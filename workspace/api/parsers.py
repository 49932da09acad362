from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


def _has_lone_surrogate(data):
    if isinstance(data, str):
        try:
            data.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(data, dict):
        return any(_has_lone_surrogate(key) or _has_lone_surrogate(value) for key, value in data.items())
    if isinstance(data, list):
        return any(_has_lone_surrogate(item) for item in data)
    return False


class StrictJSONParser(JSONParser):
    """JSON as DRF parses it, minus strings with lone surrogates (``"\\ud800"``
    is valid JSON but no database can store or even look it up): refused
    here with 400 rather than failing in a query."""

    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        if _has_lone_surrogate(data):
            raise ParseError("JSON parse error - the body contains a lone surrogate (\\ud800-\\udfff), which is not text")
        return data
