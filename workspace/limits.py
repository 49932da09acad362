"""Bounds on the work one request or one imported bundle can ask for.

Every limit is defined here, once; settings, parsers, serializers, views and
the import command refer to these names. A request over a limit is refused
before the work it asks for starts, with a message that names the limit:

- a body over its size limit: 413 from ``BodySizeLimitMiddleware``, decided
  on the ``Content-Length`` header alone (Django reads no more than that
  header announces, so nothing is read at all);
- JSON nested deeper than ``JSON_MAX_DEPTH``: 400 from the JSON parser
  (``json_check_depth``), found by a linear scan before the decoder, whose
  recursion would otherwise overflow;
- a list or object with too many items: 400 naming the field (``check_size``,
  ``priorities_check_limits``, ``bundle_check_limits``).

The sizes are generous for the method (studies have a handful of experts and
a few dozen attributes and metrics) and keep the slowest accepted request at
a few seconds, well inside the web server's timeout (``gunicorn.conf.py``).
"""

import re
from collections.abc import Callable
from itertools import accumulate

from django.http import HttpRequest, HttpResponse, JsonResponse

from engine import feedback

from .errors import InvalidInput

MB = 1024 * 1024

# --- request bodies --------------------------------------------------------------
# Any request body (JSON, form or upload): 1 MB holds thousands of
# measurements or a whole expert's inputs.
BODY_MAX_BYTES = 1 * MB
# An imported bundle holds a whole study, so its endpoint allows more.
IMPORT_BODY_MAX_BYTES = 10 * MB
# Fields of one form body (Django's DATA_UPLOAD_MAX_NUMBER_FIELDS).
FORM_MAX_FIELDS = 1000
# Files in one multipart body (DATA_UPLOAD_MAX_NUMBER_FILES).
FORM_MAX_FILES = 10
# Nesting of a JSON body. The deepest document the API takes, a bundle's
# local metric priorities, is 7 levels deep.
JSON_MAX_DEPTH = 32

# --- a study, in a bundle or through the API ----------------------------------------
# Each expert, attribute, metric and candidate of an import goes through its
# service (a few queries each, 3-8 ms on a loaded machine with SQLite), the
# rest is written in bulk. Measured on SQLite with the machine's two cores
# busy: a draft bundle at every limit (200 experts, 50 attributes, 200
# metrics, 1,000 candidates, 50,000 measurements) imports in 8 s; a closed one
# of 150 experts with every input (43,000 entries) in 11 s: inside the web
# server's 30 s timeout. The method's studies are far smaller (the case study
# has four experts); FORMATS.md sizes results for 100 experts, 20 metrics and
# 1,000 candidates.
MAX_EXPERTS = 200
MAX_ATTRIBUTES = 50
MAX_METRICS = 200
MAX_CANDIDATES = 1000
# An MLflow import of more runs than this runs as a Celery task (tracking.tasks):
# the API answers 202 with a status resource, the page shows its progress.
MLFLOW_IMPORT_INLINE_RUNS = 50
# Everything else a bundle holds is written in bulk, at tens of microseconds
# a row: measurements, vote names, weights, judgments, ranges and peer weights
# together, over all experts.
BUNDLE_MAX_ENTRIES = 50_000
# The prediction sets a bundle carries for its elicited metrics (FORMATS.md):
# each elicited metric's and each candidate's newest, at most.
PREDICTION_SETS_MAX = MAX_METRICS + MAX_CANDIDATES
# Measurements in one ``PUT .../measurements/`` (a bulk upsert: more go in
# several requests).
MEASUREMENTS_PER_PUT_MAX = 10_000

# --- pages whose size must not grow with the study (issue 19) ------------------------
# Candidates per page wherever a page lists candidates: the measurements
# table (all of them in its CSV download) and the candidates a range would
# newly veto on the ranges step.
CANDIDATES_PER_PAGE = 25
# The ranges step's strip draws one mark per candidate, with a table of every
# candidate under it, up to this many candidates; beyond, the marks are
# binned (STRIP_BINS bins across the strip, each a bar of its candidates,
# the vetoed ones apart) and only the candidates a range newly vetoes are named.
STRIP_MARKS_MAX = 50
STRIP_BINS = 40


def judgments_max(items: int) -> int:
    """Pairwise judgments over ``items`` items: one per pair, the reciprocal
    being implied."""
    return items * (items - 1) // 2


def too_many(noun: str, count: int, limit: int) -> str:
    return f"too many {noun}: {count} given, the limit is {limit}"


def check_size(value: object, *, field: str, limit: int, noun: str) -> object:
    """Refuse a list or object of more than ``limit`` items at ``field``.
    Anything else passes: the shape checks that follow refuse it with their
    own message."""
    if isinstance(value, (list, dict)) and len(value) > limit:
        raise InvalidInput({field: too_many(noun, len(value), limit)})
    return value


def _counted(value: object, *, field: str, limit: int, noun: str) -> int:
    """``check_size``, then the number of items (0 for anything else)."""
    check_size(value, field=field, limit=limit, noun=noun)
    return len(value) if isinstance(value, (list, dict)) else 0


def _path(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _local_check_limits(section: object, *, field: str, items: int, noun: str) -> int:
    if not isinstance(section, dict):
        return 0
    weights = _counted(section.get("weights"), field=_path(field, "weights"), limit=items, noun=f"{noun} weights")
    return weights + _counted(
        section.get("judgments"),
        field=_path(field, "judgments"),
        limit=judgments_max(items),
        noun=f"judgments (one per pair of {items} {noun}s)",
    )


def priorities_check_limits(
    priorities: object, *, field: str = "", attributes: int = MAX_ATTRIBUTES, metrics: int = MAX_METRICS
) -> int:
    """An expert's prioritisation (a ``priorities`` section): weights over
    at most ``attributes`` attributes, judgments at most one per pair, and
    the same for each attribute's local metric priorities. Returns the
    number of weights and judgments."""
    entries = _local_check_limits(priorities, field=field, items=attributes, noun="attribute")
    if not isinstance(priorities, dict):
        return entries
    local = check_size(
        priorities.get("metric_priorities"),
        field=_path(field, "metric_priorities"),
        limit=attributes,
        noun="attributes with metric priorities",
    )
    if isinstance(local, dict):
        for attribute, section in local.items():
            path = _path(field, f"metric_priorities.{attribute}")
            entries += _local_check_limits(section, field=path, items=metrics, noun="metric")
    return entries


def _per_expert(bundle: dict, key: str) -> dict:
    section = check_size(bundle.get(key), field=key, limit=MAX_EXPERTS, noun="experts")
    return section if isinstance(section, dict) else {}


def bundle_check_limits(bundle: object) -> None:
    """Refuse a bundle (``approve-study/1``) over any size limit, before the
    import does any work. Only sizes are checked; the import checks the rest."""
    if not isinstance(bundle, dict):
        return
    check_size(bundle.get("experts"), field="experts", limit=MAX_EXPERTS, noun="experts")
    attributes = check_size(bundle.get("attributes"), field="attributes", limit=MAX_ATTRIBUTES, noun="attributes")
    metrics = check_size(bundle.get("metrics"), field="metrics", limit=MAX_METRICS, noun="metrics")
    candidates = check_size(bundle.get("candidates"), field="candidates", limit=MAX_CANDIDATES, noun="candidates")
    # Judgments are bounded by the pairs of the bundle's own attributes and
    # metrics (at most their limits, checked above).
    attribute_count = len(attributes) if isinstance(attributes, list) else 0
    metric_count = len(metrics) if isinstance(metrics, list) else 0

    entries = _measurement_entries(candidates)
    entries += _vote_entries(bundle.get("votes"))
    entries += _expert_entries(bundle, attribute_count=attribute_count, metric_count=metric_count)
    _elicited_check_limits(bundle)
    if entries > BUNDLE_MAX_ENTRIES:
        noun = "entries (measurements, vote names, weights, judgments, ranges and peer weights together)"
        raise InvalidInput({"bundle": too_many(noun, entries, BUNDLE_MAX_ENTRIES)})


def _measurement_entries(candidates: object) -> int:
    """How many measurements the bundle's candidates give; refused when a
    candidate gives more than one per metric limit."""
    entries = 0
    for position, candidate in enumerate(candidates if isinstance(candidates, list) else []):
        values = candidate.get("measurements") if isinstance(candidate, dict) else None
        field = f"candidates[{position}].measurements"
        entries += _counted(values, field=field, limit=MAX_METRICS, noun="measurements")
    return entries


def _vote_entries(votes: object) -> int:
    """How many names the bundle's votes give; refused when a section has
    more experts, or an expert more names, than the limits."""
    entries = 0
    if isinstance(votes, dict):
        for kind, limit in (("attributes", MAX_ATTRIBUTES), ("metrics", MAX_METRICS)):
            section = check_size(votes.get(kind), field=f"votes.{kind}", limit=MAX_EXPERTS, noun="experts")
            for username, names in section.items() if isinstance(section, dict) else ():
                entries += _counted(names, field=f"votes.{kind}.{username}", limit=limit, noun=f"{kind} voted for")
    return entries


def _expert_entries(bundle: dict, *, attribute_count: int, metric_count: int) -> int:
    """How many judgments, ranges and peer weights the experts' sections
    give (in that order of checking); refused over any section's limit."""
    entries = 0
    for username, priorities in _per_expert(bundle, "priorities").items():
        entries += priorities_check_limits(
            priorities, field=f"priorities.{username}", attributes=attribute_count, metrics=metric_count
        )
    for username, ranges in _per_expert(bundle, "ranges").items():
        entries += _counted(ranges, field=f"ranges.{username}", limit=MAX_METRICS, noun="ranges")
    for username, weights in _per_expert(bundle, "peer_weights").items():
        entries += _counted(weights, field=f"peer_weights.{username}", limit=MAX_EXPERTS, noun="peer weights")
    return entries


def _elicited_check_limits(bundle: dict) -> None:
    """Refuses the elicited metrics' sections over their sizes: at most one
    prediction set per elicited metric, each for at most every candidate,
    and at most one answer per expert."""
    # The elicited metrics' sets: at most one per elicited metric and one per candidate.
    sets = check_size(
        bundle.get("prediction_sets"),
        field="prediction_sets",
        limit=PREDICTION_SETS_MAX,
        noun="prediction sets",
    )
    for position, entry in enumerate(sets if isinstance(sets, list) else []):
        if isinstance(entry, dict):
            field = f"prediction_sets[{position}].candidates"
            check_size(entry.get("candidates"), field=field, limit=MAX_CANDIDATES, noun="candidates")
    elicited = check_size(bundle.get("elicited_metrics"), field="elicited_metrics", limit=MAX_METRICS, noun="metrics")
    for name, entry in elicited.items() if isinstance(elicited, dict) else ():
        if isinstance(entry, dict):
            field = f"elicited_metrics.{name}.answers"
            check_size(entry.get("answers"), field=field, limit=MAX_EXPERTS, noun="experts")


# --- fields ------------------------------------------------------------------------
# The lengths of the text a study holds: the models' columns, the forms, the
# API's serializers and the services' checks all read these (changing one is
# a migration).
NAME_MAX_LENGTH = 100  # an attribute's, a metric's or a candidate's name; an API token's label
TITLE_MAX_LENGTH = 200  # a study's title
STUDY_DESCRIPTION_MAX_LENGTH = 20_000  # a study's description (checked by the services, not the column)
ITEM_DESCRIPTION_MAX_LENGTH = 5000  # an attribute's or a candidate's description
UNIT_MAX_LENGTH = 50  # a metric's unit
USERNAME_MAX_LENGTH = 150  # django.contrib.auth's username column

# --- vote thresholds (METHOD.md 2, Decision: "at least c votes") ---------------------
# A new study's thresholds: every complementary attribute with a vote, every
# metric of a selected attribute.
ATTRIBUTE_THRESHOLD_DEFAULT = 1
METRIC_THRESHOLD_DEFAULT = 0
# The largest threshold; the column is a 32-bit integer.
MAX_THRESHOLD = 10000


# --- prediction sets -----------------------------------------------------------------
# An uploaded prediction file (approve-predictions/1, FORMATS.md) is read,
# checked, compressed and stored within the request. Measured on the shared
# two-core machine with SQLite (bench/predictions.py times the reader alone,
# at 250,000-400,000 rows a second): a 20 MB file of typical rows (candidate,
# instance, fold, labels, a score, a time, a context: 57 bytes a row) holds
# 350,000 rows and is stored in 1.6 s; a million short rows (``J48,1,0``,
# 8.5 MB) in 0.8 s. Since the reader is pyarrow's and arrays are packed at
# deflate level 1 (issue 19), a million rows of candidate, labels, a score and
# a fold (15 MB as CSV, 1.6 MB as Parquet) are stored through the page in
# 0.5-1.1 s as CSV and 0.3-0.7 s as Parquet (bench/evaluate_predictions.py). The
# row limit bounds files of short rows, which pack the
# most rows into the bytes: the slowest accepted upload stays near 2 s, well
# inside the web server's 30 s. A test set of 30,000 instances for 10
# candidates fits in one upload; larger ones go in several (one per
# candidate, the upload naming it) or through ``import_predictions``, which
# the operator runs without either limit.
PREDICTIONS_MAX_BYTES = 20 * MB
PREDICTIONS_MAX_ROWS = 1_000_000
# What a prediction set's arrays may take in memory once read, when they come
# as archives in a study bundle through the web or the API (an upload's are
# bounded by its bytes, and its instance ids and decompressed Parquet
# columns by this, below): the arrays of the largest upload are a few times its
# text (a "0," of two bytes is an 8-byte number), while a crafted archive of
# a few kilobytes could announce gigabytes. ``import_study`` has no limit.
PREDICTIONS_MAX_ARRAY_BYTES = 8 * PREDICTIONS_MAX_BYTES
# The most distinct labels (classes) a prediction set may have, whoever
# uploads it (the web, the API and ``import_predictions`` alike). Several of
# a set's structures grow with the square of its classes (the confusion
# matrix, one-vs-rest metrics, probabilities per class): unbounded, a file of
# 20,000 labels took minutes and 16 GB to evaluate, and one of a million
# could not be evaluated at all. 100 classes keep the confusion matrix at
# 10,000 cells, a table a person can still scroll through, and the first
# evaluation of the largest allowed set (a million rows, ten candidates)
# under half a second of CPU and 30 MiB (bench/evaluation_limits.py; it is
# then kept with the set); a classification task with more classes is not
# what a group of experts validates candidate by candidate. The reader
# stops at the block of rows that passes it.
PREDICTIONS_MAX_CLASSES = 100
# What a prediction file's text may expand to, whatever the file weighs
# (issue 29: a 1,215-byte Parquet file whose dictionary held one 5 MiB label
# for 400 rows took 28 s and 2.3 GB, and its refusal quoted the label).
# Checked on Arrow's dictionaries before any value is made a row's string,
# on a Parquet footer's announced sizes before any page is read, and on a
# CSV's cells as they are read, whoever uploads the file:
# - a label's length, and any text value's (a fold, a context's value, a
#   candidate's name, an instance id), in characters. A label is shown on
#   pages and in the confusion matrix; a Parquet column chunk is refused when
#   its footer announces more than its values at this length could take.
PREDICTIONS_MAX_LABEL_LENGTH = 1000
# - the UTF-8 bytes of the distinct labels, folds, contexts and candidates'
#   names together: what a set keeps as its lists (PredictionSet.labels,
#   folds, contexts) and its pages list. Labels alone are at most
#   PREDICTIONS_MAX_CLASSES x PREDICTIONS_MAX_LABEL_LENGTH (100 KB); the rest
#   leaves room for tens of thousands of contexts.
PREDICTIONS_MAX_DISTINCT_BYTES = 1 * MB
# Through the web and the API, PREDICTIONS_MAX_ARRAY_BYTES also bounds an
# upload's instance ids as an array (rows x 4 bytes x the longest id's
# characters: NumPy gives each id the longest one's width) and what a
# Parquet file's columns announce once decompressed. An error quotes at
# most 40 characters of a value (evaluation.predictions.QUOTE_MAX_CHARS).

# --- discussion ----------------------------------------------------------------------
# One post in the thread of an attribute or a metric: a few paragraphs of
# argument, not a document (the database holds the same bound).
DISCUSSION_POST_MAX_CHARS = 5000

# Monte Carlo robustness analyses (engine.analyses): samples asked for by
# default and at most; each sample costs about a quarter of a run's
# evaluation, and the samples are spread over every worker in chunks.
ANALYSIS_SAMPLES_DEFAULT = 2000
ANALYSIS_SAMPLES_MAX = 100_000

# Leave-one-out has no options; a Monte Carlo's ranges move by less than this
# share of their width (engine.robustness.SamplingSpec needs under half).
RANGES_PERCENT_MAX = 50

# --- elicited metrics (evaluation) ------------------------------------------------------
# The most questions an elicited metric may ask each expert: beyond it the
# designer is asked for a larger tolerance or the diagonal kind.
ELICITATION_MAX_QUESTIONS = 400

# --- MLflow tracking (tracking) -----------------------------------------------------------
# A connection's fields and an import's mapping, as stored and as accepted.
TRACKING_URI_MAX_LENGTH = 500
TRACKING_TOKEN_MAX_LENGTH = 2000
TRACKING_FILTER_MAX_LENGTH = 2000
TRACKING_KEY_MAX_LENGTH = 250  # an MLflow metric key or a tag's name
TRACKING_PATTERN_MAX_LENGTH = 300  # the prediction artifacts' path pattern
# An MLflow experiment's or run's id (a run's is 32 hexadecimal digits).
MLFLOW_ID_MAX_LENGTH = 128
# The most JSON one call to a tracking server reads, all its pages together (a
# server paging for ever or answering huge pages is cut there), and the
# largest error answer read.
TRACKING_ANSWER_MAX_BYTES = 64 * MB
TRACKING_ERROR_MAX_BYTES = 64 * 1024
# The most runs one import reads (a study holds at most MAX_CANDIDATES); the
# most artifacts listed per run when matching a pattern, and an artifact
# path's length.
TRACKING_RUNS_MAX = MAX_CANDIDATES
TRACKING_ARTIFACTS_LISTED_MAX = 1000
TRACKING_ARTIFACT_PATH_MAX_LENGTH = 1000

# --- API conventions (docs/api.md) ---------------------------------------------------
# ``?page_size=`` on every list: from 1 to this many items a page (the default
# is REST_FRAMEWORK's PAGE_SIZE); more is a 400 naming ``page_size``.
PAGE_SIZE_MAX = 200
# ``Idempotency-Key``: at most this many characters; a key is remembered for
# a day (the same key then answers with the first answer); a request still in
# progress holds its key this long at most (a crashed worker's claim lapses).
IDEMPOTENCY_KEY_MAX_LENGTH = 255
IDEMPOTENCY_KEY_LIFETIME_SECONDS = 24 * 60 * 60
IDEMPOTENCY_CLAIM_SECONDS = 5 * 60


# --- JSON nesting ------------------------------------------------------------------
# A JSON string, closing quote optional: an unterminated string then runs to
# the end in one match instead of being retried at every later quote (which
# would make the scan quadratic). The decoder reports the error properly.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def json_depth(text: str) -> int:
    """The deepest nesting of arrays and objects in JSON ``text``, in linear
    time and without recursion (brackets inside strings do not count)."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def json_depth_error(text: str) -> str | None:
    """Why ``text`` is too deeply nested to decode, or None."""
    if json_depth(text) > JSON_MAX_DEPTH:
        return f"JSON nested deeper than {JSON_MAX_DEPTH} levels (the limit): refused before decoding"
    return None


# --- body size ---------------------------------------------------------------------


def body_limit(view_func: object) -> int:
    """The body size limit of a view: ``BODY_MAX_BYTES`` unless its class
    sets ``max_body_bytes`` (the bundle import, a prediction upload) or the
    view function was given one (``max_body``)."""
    view_class = getattr(view_func, "cls", None) or getattr(view_func, "view_class", None)
    class_limit: int | None = getattr(view_class, "max_body_bytes", None)
    function_limit: int = getattr(view_func, "max_body_bytes", BODY_MAX_BYTES)
    return class_limit or function_limit


def max_body(limit: int) -> Callable[[Callable], Callable]:
    """Give a page's view function a body limit of its own (a file upload).
    Apply it innermost: the decorators outside it copy the attribute."""

    def decorate(view: Callable) -> Callable:
        vars(view)["max_body_bytes"] = limit  # a function attribute (mypy cannot declare one on a Callable)
        return view

    return decorate


def _megabytes(size: int) -> str:
    return f"{size / MB:g} MB"


class BodySizeLimitMiddleware:
    """Answers 413 to a request whose body is over its view's limit, before
    anything reads the body. Django reads at most ``Content-Length`` bytes
    (a body without that header is read as empty), so the header decides.
    Placed first, it runs before the CSRF check, which may read a form."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_view(
        self, request: HttpRequest, view_func: Callable, view_args: tuple, view_kwargs: dict
    ) -> HttpResponse | None:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0  # Django treats it as no body too
        limit = body_limit(view_func)
        if length > limit:
            detail = f"The request body is {length} bytes; the limit is {limit} bytes ({_megabytes(limit)})."
            # The API's error envelope (workspace.api.exceptions.envelope).
            return JsonResponse({"code": "request_too_large", "detail": detail, "fields": {}}, status=413)
        return None


# The History tab's records per page (issue 22).
HISTORY_PER_PAGE = 50
# --- Revision rounds (docs/method.md, "Revision rounds") ---
# The longest message the designer opens a round with, and the longest reason
# an expert gives for revising or confirming a step.
ROUND_MESSAGE_MAX_CHARS = 2000
ROUND_REASON_MAX_CHARS = 500
# How many experts' answers a round's feedback needs (METHOD.md 9): nothing
# below the first, only the coarse band of the median below the second
# (engine.feedback, where they are defined).
ROUND_FEEDBACK_MIN_EXPERTS = feedback.MIN_EXPERTS
ROUND_FEEDBACK_FINE_MIN_EXPERTS = feedback.FINE_MIN_EXPERTS
# The most revision rounds a bundle may carry (each keeps every expert's inputs).
ROUNDS_MAX = 50
# --- Absent experts (docs/method.md, "Absent experts") ---
# The longest reason the designer gives for excluding an expert, and the
# largest quorum a study may ask (the experts who must take part to close).
ABSENCE_REASON_MAX_CHARS = 500
QUORUM_MAX = 1000

# --- The admin's big lists (workspace/admin_lists.py) ---
# Above this many rows (PostgreSQL's estimate) an unfiltered admin list is
# counted from the estimate, not row by row (issue 33, item 8).
ADMIN_ESTIMATED_COUNT_ABOVE = 10_000
