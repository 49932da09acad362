"""Writes of many rows at once, in a number of queries that does not grow
with the rows: the bundle importer adds a thousand candidates in one INSERT
rather than a thousand ``candidate_add`` calls. Each applies the same rules
as the one-row service it mirrors, to every row before writing any.
"""

from django.db import transaction

from .errors import InvalidInput
from .models import Candidate, Study
from .services import _locked, _next_position, _text


@transaction.atomic
def candidates_add(*, study: Study, candidates: list[dict]) -> list[Candidate]:
    """Add ``[{"name", "description"}]`` after the study's candidates, in
    this order, with the rules of ``services.candidate_add``. The first bad
    entry is refused naming ``candidates[i].name`` (or ``.description``);
    then nothing is written. Queries: the lock, the names taken, the last
    position, one INSERT."""
    study = _locked(study)
    taken = set(Candidate.objects.filter(study=study).values_list("name", flat=True))
    position = _next_position(study.candidates)
    rows = []
    for index, entry in enumerate(candidates):
        field = f"candidates[{index}]"
        try:
            name = _text(entry.get("name"), "name", max_length=100)
            description = _text(entry.get("description", ""), "description", max_length=5000, required=False)
        except InvalidInput as error:
            raise error.within(field) from None
        if name in taken:
            raise InvalidInput({f"{field}.name": f"candidate {name!r} already exists in this study"})
        taken.add(name)
        rows.append(Candidate(study=study, name=name, description=description, position=position + index))
    return Candidate.objects.bulk_create(rows)
