"""What the run pages share: a run of a study the user is a member of."""

from typing import TYPE_CHECKING

from django.http import Http404, HttpRequest

from workspace.views.common import study_for_member

from .. import selectors
from ..models import Run

if TYPE_CHECKING:
    from workspace.views.common import MemberStudy


def run_for_member(request: HttpRequest, run_id: int, results: str = "results_core") -> tuple[Run, "MemberStudy"]:
    """A run of a study the user is a member of, with its results (without
    their stored document text; ``results`` names how much of them, a field
    of ``engine.selectors.run_get``) but not its snapshot, and that study as
    ``study_for_member`` gives it; 404 for anyone else. Three queries."""
    try:
        # the pages never serve the stored document text: not read
        run = selectors.run_get(run_id=run_id, user=request.user, fields=(results,))
    except Run.DoesNotExist:
        raise Http404("No such run.") from None
    return run, study_for_member(request, run.study_id)
