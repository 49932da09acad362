"""Benchmark of every page of docs/pages.md at the documented limits (not a
test): issue 19, item 1; elicited metrics, issue 21.

Builds two studies from ``approve-study/1`` bundles (bench/scale.py's shape,
fixed seed): 100 experts x 20 metrics x 1,000 candidates, and 4 experts x
4 metrics x 4 candidates. Each is imported closed and given an elicited
metric (issue 21; docs/method.md 7.4): a prediction set with every
candidate's class probabilities (3 classes, ``INSTANCES`` = 200 instances a
candidate: 200,000 rows at 1,000 candidates, a Parquet file made in memory
and imported as ``import_predictions`` does, without the web's limits and
with its evaluations kept), its first selected higher-is-better metric
("metric 0.0") elicited from it (diagonal, reference the first candidate,
epsilon 0.05; the phase moved to the assessment around the call, as an
operator's tool), and every expert's finished answers stored directly (a
code string of the right length whose checks agree, and a normalised random
vector of weights each). Each study is then run twice (for the run pages
and the comparison; the runs score each expert on their own value of the
elicited metric, the snapshot carrying ``expert_values``), put back in
assessment so that the expert steps are editable, as experts see them, and
the second expert's answers are cleared (their step asks the first
question). Then, for every page of the map, as the designer, as an expert
(``expert000``) and, for the elicitation step, as that second expert
("cleared"; pages a role may not open are left out), it prints the HTML
bytes, the SQL queries and the CPU time of this process (the best of a few
requests, after one that warms the caches), at both sizes, the CPU time of
that first request at the big size with this process's counted confusions
and prepared elicitations forgotten first ("cold big":
``evaluation.selectors._counted_confusions`` then reads the 1,000 candidates'
archives), and the ratio of the big page's CPU time to the small one's,
against the goals of issue 19:

* under 1 MB of HTML at 100 x 20 x 1,000;
* under 3x the CPU time of the same page at 4 x 4, 10x for the pages that
  list every expert by nature (the experts page, the peer-weights step, and
  the elicitation's design page, whose progress table has a row for each
  expert, with their result once closed);
* the robustness page's what-if fragment within 200 ms of CPU.

The elicited metric's pages: the design page
(``/studies/{s}/predictions/metrics/{m}/elicitation/``, in the assessment
and with the study closed, when it shows the candidates' values, median and
spread beyond 8 experts, paged at 25), the expert's step
(``/studies/{s}/my/elicitation/{m}/``, finished: the result chart; and the
cleared expert's next question) and the measurements page closed (the
spreads, paged with the table). The ranges step and its previews preview on
the expert's own values, the candidate breakdown has its own-values table,
the study home a column per elicited metric in the designer's grid: those
pages are measured in their places in the map. What changed for the pages
measured before issue 21: the study has a prediction set (the predictions
page lists its 1,000 candidates) and an elicited metric in every page that
shows one, and the runs use the experts' own values; ``--plain`` builds the
studies without either (the pages' figures as before, the elicited pages
left out).

The run's pages include its on-demand section ("What the experts weighed",
``/runs/{run}/weights/``), a candidate's breakdown and the paged comparison,
asked for as htmx asks (``HX-Request: true``) where they are fragments.
Downloads (the bundle, the results JSON and CSV, the measurements CSV, the
API's study export) are listed too, measured without the size goal: they
carry the whole study; their goal is issue 33's, gzipped (as a browser
asks, ``Accept-Encoding: gzip``) to at most 25 % of their bytes.

How to run it, from the repository root, on a PostgreSQL database of your own::

    createdb -h 127.0.0.1 -U postgres approve_bench
    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/approve_bench
    .venv/bin/python manage.py migrate
    .venv/bin/python bench/pages.py

``--only SUBSTRING`` measures the pages whose name contains it. Both studies
are deleted at the end unless ``--keep`` is given.

Then (issue 33, item 7; ``--served 0`` leaves it out) the same database is
served by gunicorn with gunicorn.conf.py (preloaded, ``WEB_CONCURRENCY``
workers, default 2), and the run page, the ranges step and the robustness
page of the big study are asked over HTTP as the expert's browser asks
them (session cookie, gzip, behind a TLS proxy) beside ``/health/``: the
median of ``--served`` requests one at a time, within 10x ``/health/``'s,
and the 95th percentile with 20 clients at once, under 1 s (issue 33's
goals). The in-process figures above leave out the server, the network and
the compression; these leave out nothing but the proxy.
"""

import argparse
import io
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time
import warnings

for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import scale  # noqa: E402  (bench/scale.py: the bundle and the Django set-up)

SIZE_GOAL = 1_000_000
RATIO_GOAL, EVERY_EXPERT_RATIO_GOAL = 3.0, 10.0
WHAT_IF_GOAL = 0.2  # seconds of CPU for the robustness what-if at 100 x 20 x 1,000
GZIP_GOAL = 0.25  # a download at the limits compressed to at most this share of its bytes (issue 33)
#: The elicited metric's prediction set: instances per candidate, and classes.
INSTANCES, LABELS = 200, ["class A", "class B", "class C"]
BIG = {"experts": 100, "attributes": 5, "metrics_per_attribute": 4, "candidates": 1000}
SMALL = {"experts": 4, "attributes": 2, "metrics_per_attribute": 2, "candidates": 4}


def bundle(experts, attributes, metrics_per_attribute, candidates):
    """bench/scale.py's closed study, at another size."""
    saved = (scale.EXPERTS, scale.ATTRIBUTES, scale.METRICS_PER_ATTRIBUTE, scale.CANDIDATES)
    scale.EXPERTS, scale.ATTRIBUTES, scale.METRICS_PER_ATTRIBUTE, scale.CANDIDATES = (
        experts,
        attributes,
        metrics_per_attribute,
        candidates,
    )
    try:
        built = scale.scale_bundle()
    finally:
        scale.EXPERTS, scale.ATTRIBUTES, scale.METRICS_PER_ATTRIBUTE, scale.CANDIDATES = saved
    built["title"] = f"Pages benchmark {experts}x{attributes * metrics_per_attribute}x{candidates}"
    built["designer"] = f"bench-designer-{candidates}"
    built["experts"] = [f"{name}-{candidates}" for name in built["experts"]]
    rename = {name.removesuffix(f"-{candidates}"): name for name in built["experts"]}
    built["priorities"] = {rename[e]: p for e, p in built["priorities"].items()}
    built["ranges"] = {rename[e]: r for e, r in built["ranges"].items()}
    built["peer_weights"] = {rename[e]: {rename[o]: w for o, w in p.items()} for e, p in built["peer_weights"].items()}
    return built


def predictions_parquet(candidates, seed):
    """An ``approve-predictions/1`` Parquet file in memory: every candidate's
    class probabilities of the same ``INSTANCES`` instances of three classes
    (y_true drawn from a softmax of ``p_i x`` on a grid of x, as
    tests/evaluation/elicited_fixtures.py; each candidate that softmax with
    noise of its own), ``(bytes, rows)``."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    x = np.linspace(-1, 1, INSTANCES)
    logits = np.outer(x, [0.5, -1.0, 1.5])
    eta = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    truth = (rng.random(INSTANCES)[:, None] > eta.cumsum(axis=1)).sum(axis=1)
    noisy = logits[None, :, :] + rng.normal(0.0, 1.0, (len(candidates), INSTANCES, len(LABELS)))
    proba = np.exp(noisy) / np.exp(noisy).sum(axis=2, keepdims=True)
    columns = {
        "candidate": np.repeat(np.array(candidates, dtype=object), INSTANCES),
        "y_true": np.tile(np.array(LABELS, dtype=object)[truth], len(candidates)),
    }
    for c, label in enumerate(LABELS):
        columns[f"proba:{label}"] = proba[:, :, c].reshape(-1)
    out = io.BytesIO()
    pq.write_table(pa.table(columns), out)
    return out.getvalue(), len(candidates) * INSTANCES


def elicit(study, seed):
    """Give ``study`` (closed) a prediction set with every candidate's class
    probabilities, imported as ``import_predictions`` does (no web limits,
    its evaluations kept), make its first selected higher-is-better metric
    elicited (diagonal, from the first candidate, epsilon 0.05) and store
    every expert's finished answers: a plausible code string (its checks
    consistent) and a normalised random vector of weights each."""
    import numpy as np
    from django.db.models import F

    from evaluation import elicited as elicited_domain
    from evaluation import services as evaluation_services
    from evaluation.models import ElicitationAnswers
    from evaluation.selectors import prediction_set_get
    from workspace.models import Metric, Study

    names = list(study.candidates.order_by("position", "id").values_list("name", flat=True))
    data, rows = predictions_parquet(names, seed)
    prediction_set = evaluation_services.prediction_set_import(
        study=study,
        stream=io.BytesIO(data),
        name=f"bench probabilities ({rows:,} rows).parquet",
        uploaded_by=None,
        max_bytes=None,
        max_rows=None,
    )
    evaluation_services.prediction_set_evaluations_keep(
        prediction_set=prediction_set_get(study=study, prediction_set_id=prediction_set.pk)
    )
    metric = Metric.objects.filter(study=study, is_selected=True, better="higher").order_by("position", "id").first()
    # Operators' tool: the design may change in draft, voting and assessment only.
    Study.objects.filter(pk=study.pk).update(phase="assessment", updated_at=F("updated_at"))
    try:
        elicited = evaluation_services.elicited_metric_set(
            metric=metric, kind="diagonal", prediction_set=prediction_set.pk, reference_candidate=names[0], epsilon=0.05
        )
    finally:
        Study.objects.filter(pk=study.pk).update(phase="closed", updated_at=F("updated_at"))
    total = elicited_domain.elicitation_replayed(elicited, "").total_queries
    rng = np.random.default_rng(seed)
    answers = []
    for membership in study.memberships.filter(role="expert").order_by("pk"):
        code = "".join(rng.choice(list("120"), size=total))
        code += "".join(code[position] for position in elicited_domain.check_positions(total))
        weights = rng.uniform(0.05, 1.0, len(LABELS))
        weights = [float(w) for w in weights / weights.sum()]
        answers.append(ElicitationAnswers(elicited_metric=elicited, expert=membership, answers=code, weights=weights))
    ElicitationAnswers.objects.bulk_create(answers)
    study.refresh_from_db()
    return metric, rows


def build(size, bare=False):
    """Import the study, elicit a metric, run it twice, reopen the assessment
    and clear one expert's answers: (study, expert, runs, metric, cleared)."""
    from django.core.management import call_command
    from django.db.models import F

    from engine.models import Run
    from evaluation.models import ElicitationAnswers
    from workspace.models import Study

    text = json.dumps(bundle(**size))
    path = pathlib.Path(f"/tmp/approve-pages-bundle-{os.getpid()}-{size['candidates']}.json")
    path.write_text(text, encoding="utf-8")
    try:
        out = io.StringIO()
        call_command("import_study", str(path), stdout=out)
    finally:
        path.unlink(missing_ok=True)
    study = Study.objects.select_related("designer").get(pk=int(out.getvalue()))
    metric, rows = elicit(study, seed=size["candidates"]) if not bare else (None, 0)
    for _ in range(2):
        call_command("run_validation", str(study.pk), "--json", stdout=io.StringIO())
    succeeded = Run.objects.filter(study=study, status=Run.Status.SUCCEEDED)
    runs = list(succeeded.order_by("pk").values_list("pk", flat=True))
    # Operators' tool: the phase is moved back directly, as the admin would not.
    Study.objects.filter(pk=study.pk).update(phase="assessment", updated_at=F("updated_at"))
    study.refresh_from_db()
    expert, cleared = study.memberships.select_related("user").filter(role="expert").order_by("user__username")[:2]
    # The second expert starts again: their step asks the first question.
    if metric is not None:
        ElicitationAnswers.objects.filter(expert=cleared, elicited_metric__metric=metric).update(
            answers="", weights=None
        )
        print(f"built {study.title}: {rows:,} prediction rows, {metric.name} elicited", file=sys.stderr)
    return study, expert.user, runs, metric, cleared.user


def pages(study, expert_user, runs, elicited):
    """``[(name, method, url, data, who, kind, phase)]``: every page of the
    map. ``who`` is the roles that open it ("cleared": the expert whose
    elicitation answers were cleared); ``kind`` "page", "download", "every
    expert" (the pages that list every expert by nature) or "what-if"
    (the robustness page's fragment, whose goal is a time); ``phase`` None,
    or the phase the study is put in for the page (then back in the
    assessment)."""
    from workspace.models import Metric

    s, (first, second), m = study.pk, runs[:2], getattr(elicited, "pk", None)
    metrics = list(Metric.objects.filter(study=study, is_selected=True).order_by("position", "id"))
    ranges = {
        r["metric_id"]: (r["least_acceptable"], r["desired"])
        for r in expert_user.memberships.get(study=study, role="expert").ranges.values(
            "metric_id", "least_acceptable", "desired"
        )
    }
    typed = {}
    for n, metric in enumerate(metrics):
        least, desired = ranges.get(metric.pk) or metric.default_range
        if n == 0:  # one range typed tighter than saved: some candidates newly vetoed
            least = least + (desired - least) * 0.3
        typed[f"least-{metric.pk}"], typed[f"desired-{metric.pk}"] = repr(least), repr(desired)
    candidate = study.candidates.order_by("position", "id").values_list("name", flat=True).first()
    # The what-if: the first attribute's weight doubled, the others as the run had them.
    what_if = "w0=60&w1=10"
    both, designer, expert = ("designer", "expert"), ("designer",), ("expert",)
    design, step = f"/studies/{s}/predictions/metrics/{m}/elicitation/", f"/studies/{s}/my/elicitation/{m}/"
    elicitation = [
        # Its progress table lists every expert (with their result once closed).
        ("elicitation design", "get", design, None, designer, "every expert"),
        # Closed: the finished experts' values of every candidate (their median and spread beyond 8 experts).
        ("elicitation design", "get", design, None, designer, "every expert", "closed"),
        ("elicitation step", "get", step, None, expert, "page"),  # finished: the result chart
        ("elicitation step", "get", step, None, ("cleared",), "page"),  # answers cleared: the first question
        # Closed: each elicited metric's spread across the experts, paged with the table.
        ("measurements", "get", f"/studies/{s}/measurements/", None, both, "page", "closed"),
    ]
    plain = [
        ("dashboard", "get", "/", None, both, "page"),
        ("study home", "get", f"/studies/{s}/", None, both, "page"),
        ("phase confirmation", "get", f"/studies/{s}/phase/closed/", None, designer, "page"),
        ("study delete", "get", f"/studies/{s}/delete/", None, designer, "page"),
        ("setup", "get", f"/studies/{s}/setup/", None, both, "page"),
        ("measurements", "get", f"/studies/{s}/measurements/", None, both, "page"),
        ("measurements.csv", "get", f"/studies/{s}/measurements.csv", None, both, "download"),
        ("experts", "get", f"/studies/{s}/experts/", None, designer, "every expert"),
        ("expert inputs", "get", f"/studies/{s}/inputs/{expert_user.username}/", None, designer, "page"),
        ("bundle.json", "get", f"/studies/{s}/bundle.json", None, designer, "download"),
        ("predictions", "get", f"/studies/{s}/predictions/", None, designer, "page"),
        ("votes step", "get", f"/studies/{s}/my/votes/", None, expert, "page"),
        ("priorities step", "get", f"/studies/{s}/my/priorities/", None, expert, "page"),
        ("priorities preview", "post", f"/studies/{s}/my/priorities/preview/", {"method": "ahp"}, expert, "page"),
        ("ranges step", "get", f"/studies/{s}/my/ranges/", None, expert, "page"),
        ("ranges preview", "post", f"/studies/{s}/my/ranges/preview/", typed, expert, "page"),
        ("ranges check (no JS)", "post", f"/studies/{s}/my/ranges/", {**typed, "preview": "1"}, expert, "page"),
        ("peer-weights step", "get", f"/studies/{s}/my/peer-weights/", None, expert, "every expert"),
        ("discussion", "get", f"/studies/{s}/discussion/", None, both, "page"),
        ("revision rounds", "get", f"/studies/{s}/rounds/", None, both, "page"),
        ("runs", "get", f"/studies/{s}/runs/", None, both, "page"),
        ("runs status", "get", f"/studies/{s}/runs/status/", None, both, "page"),
        ("run page", "get", f"/runs/{second}/", None, both, "page"),
        ("run status", "get", f"/runs/{second}/status/", None, both, "page"),
        ("run: experts weighed", "get", f"/runs/{second}/weights/", None, both, "page"),
        ("candidate breakdown", "get", f"/runs/{second}/candidates/{candidate}/", None, both, "page"),
        ("comparison", "get", f"/runs/{second}/compare/{first}/", None, both, "page"),
        ("comparison page 2", "get", f"/runs/{second}/compare/{first}/?page=2", None, both, "page"),
        ("robustness", "get", f"/runs/{second}/robustness/", None, both, "page"),
        ("robustness what-if", "get", f"/runs/{second}/robustness/what-if/?{what_if}", None, both, "what-if"),
        ("results.json", "get", f"/runs/{second}/results.json", None, both, "download"),
        ("results.csv", "get", f"/runs/{second}/results.csv", None, both, "download"),
        ("API export", "get", f"/api/v1/studies/{s}/export/", None, designer, "download"),
    ]
    return [(*page, None) if len(page) == 6 else page for page in plain + (elicitation if elicited else [])]


def ask(client, method, url, data, **more):
    """One request of the map, over HTTPS, as htmx asks where the page is
    one of its fragments (the breakdown, the run page's sections, the
    previews and the what-if), with the headers ``more``; also
    bench/site.py's."""
    fragment = any(part in url for part in ("/candidates/", "/weights/", "preview", "/what-if/"))
    headers = {"HX-Request": "true", **more} if fragment else more
    if method == "get":
        return client.get(url, secure=True, headers=headers)
    return client.post(url, data, secure=True, headers=headers)


def measure(client, method, url, data, repeat):
    """Bytes, queries and the best CPU time of ``repeat`` requests (after
    one to warm the caches, ``cold``: its CPU time, this process's counted
    confusions and prepared elicitations forgotten first), or None if the
    role may not open the page."""
    from django.db import connection

    from evaluation import elicited as elicited_domain
    from evaluation import selectors as evaluation_selectors

    def once(**more):
        return ask(client, method, url, data, **more)

    evaluation_selectors.forget_confusions()
    elicited_domain.forget_prepared()
    cold = time.process_time()
    first = once()
    cold = time.process_time() - cold
    if first.status_code in (403, 404, 405):
        return None
    assert first.status_code == 200, (url, first.status_code)
    best, queries = None, 0
    for _ in range(repeat):
        counter = scale.Counter()
        with connection.execute_wrapper(counter):
            cpu = time.process_time()
            response = once()
            cpu = time.process_time() - cpu
        best = cpu if best is None else min(best, cpu)
        queries = counter.queries
    # What a browser receives (issue 33, item 4): the same answer gzipped.
    packed = once(**{"Accept-Encoding": "gzip"})
    return {"bytes": len(_body(response)), "gzip": len(_body(packed)), "queries": queries, "cpu": best, "cold": cold}


def _body(response):
    """An answer's bytes, whole or streamed (downloads from 1 MiB are)."""
    return b"".join(response.streaming_content) if response.streaming else response.content


def run(only, keep, repeat, bare=False, served_requests=0):
    from django.conf import settings
    from django.db.models import F
    from django.test import Client, override_settings
    from django.test.utils import setup_test_environment

    from workspace.models import Study

    warnings.filterwarnings("ignore", message="No directory at")
    setup_test_environment()
    # DEBUG is off (scale.setup_django) but nothing is collected: static
    # URLs are written as in development, without the manifest.
    plain = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
    storages = override_settings(STORAGES={**settings.STORAGES, "staticfiles": plain})
    storages.enable()
    built = []
    rows = []
    try:
        for size in (SMALL, BIG):
            built.append(build(size, bare))
        clients = {}
        for study, expert_user, _runs, _metric, cleared_user in built:
            clients[study.pk] = {}
            for role, user in (("designer", study.designer), ("expert", expert_user), ("cleared", cleared_user)):
                clients[study.pk][role] = Client()
                clients[study.pk][role].force_login(user)
        (small, *small_rest), (big, *big_rest) = built
        ids = [small.pk, big.pk]
        for small_page, big_page in zip(pages(small, *small_rest[:3]), pages(big, *big_rest[:3]), strict=True):
            name, method, _url, _data, who, kind, phase = small_page
            name = f"{name} ({phase})" if phase else name
            if only and only not in name:
                continue
            if phase:  # Operators' tool, as in build.
                Study.objects.filter(pk__in=ids).update(phase=phase, updated_at=F("updated_at"))
            try:
                for role in who:
                    a = measure(clients[small.pk][role], *small_page[1:4], repeat=repeat * 2)
                    b = measure(clients[big.pk][role], *big_page[1:4], repeat=repeat)
                    if a is None or b is None:
                        continue
                    rows.append({"page": name, "role": role, "kind": kind, "small": a, "big": b})
            finally:
                if phase:
                    Study.objects.filter(pk__in=ids).update(phase="assessment", updated_at=F("updated_at"))
        if served_requests:
            big_study, big_expert, big_runs = built[1][:3]
            served(big_study, big_expert, big_runs, served_requests)
    finally:
        if not keep:
            Study.objects.filter(pk__in=[entry[0].pk for entry in built]).delete()
    return rows


# Served by gunicorn (gunicorn.conf.py, preloaded) on the PostgreSQL database
# (issue 33, item 7): the pages whose latency issue 33 names, against /health/.
SERVED = (("run page", "/runs/{run}/", "expert"), ("ranges step", "/studies/{study}/my/ranges/", "expert"))
SERVED_ROBUSTNESS = ("robustness", "/runs/{run}/robustness/", "expert")
SERVED_RATIO_GOAL, SERVED_P95_GOAL, SERVED_CLIENTS = 10.0, 1.0, 20


def _percentile(values, share):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def served(study, expert_user, runs, requests):
    """Start gunicorn on this database, then time each page of ``SERVED``
    (and /health/) over HTTP as a browser asks it (its session cookie,
    ``Accept-Encoding: gzip``, behind a TLS proxy): the median of
    ``requests`` requests one at a time, and the 95th percentile with
    ``SERVED_CLIENTS`` clients at once. Prints the ratios to /health/."""
    import concurrent.futures
    import socket
    import subprocess
    import urllib.request

    from django.conf import settings
    from django.test import Client

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = pathlib.Path(__file__).resolve().parent.parent
    env = {
        **os.environ,
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "WEB_CONCURRENCY": os.environ.get("WEB_CONCURRENCY", "2"),
        "SECURE_PROXY_SSL_HEADER": "true",
        "LOG_LEVEL": "WARNING",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
    }
    # As production serves them: collected (./staticfiles, the manifest the pages name).
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"], cwd=root, env=env, check=True)
    log = open(pathlib.Path(tempfile.gettempdir()) / "approve-bench-served-gunicorn.log", "w")  # noqa: SIM115 - gunicorn writes to it until stopped
    gunicorn = subprocess.Popen(
        [str(pathlib.Path(sys.executable).with_name("gunicorn")), "--config", "gunicorn.conf.py", "approve_site.wsgi"],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    client = Client()
    client.force_login(expert_user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"

    def get(path):
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}{path}",
            headers={"Cookie": cookie, "X-Forwarded-Proto": "https", "Accept-Encoding": "gzip"},
        )
        started = time.perf_counter()
        with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310 - our own server
            answer.read()
            assert answer.status == 200, (path, answer.status)
        return time.perf_counter() - started

    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                get("/health/")
                break
            except OSError:
                if time.monotonic() > deadline or gunicorn.poll() is not None:
                    sys.exit(f"gunicorn did not answer: see {log.name}")
                time.sleep(0.5)
        first, second = runs[:2]
        targets = [("/health/", "/health/")] + [
            (name, url.format(run=second, study=study.pk)) for name, url, _ in (*SERVED, SERVED_ROBUSTNESS)
        ]
        results = {}
        for name, path in targets:
            get(path)  # the page's own first request (its caches)
            alone = [get(path) for _ in range(requests)]
            with concurrent.futures.ThreadPoolExecutor(SERVED_CLIENTS) as pool:
                crowd = list(pool.map(get, [path] * (SERVED_CLIENTS * 5)))
            results[name] = (statistics.median(alone), _percentile(crowd, 0.95))
    finally:
        gunicorn.terminate()
        gunicorn.wait(timeout=30)
        log.close()
    health = results["/health/"][0]
    print(
        f"\nserved by gunicorn ({env['WEB_CONCURRENCY']} workers) on PostgreSQL, big study, as {expert_user.username}:"
    )
    print(f"{'page':<14} {'p50 1 client':>13} {'x /health/':>10} {'p95 20 clients':>15}  verdict")
    missed = 0
    for name, (median, p95) in results.items():
        ratio = median / health
        problems = []
        if name != "/health/" and ratio > SERVED_RATIO_GOAL:
            problems.append(f"p50 over {SERVED_RATIO_GOAL:.0f}x /health/")
        if p95 >= SERVED_P95_GOAL:
            problems.append("p95 over 1 s")
        missed += bool(problems)
        verdict = "MISSES " + ", ".join(problems) if problems else "ok"
        print(f"{name:<14} {median * 1000:>11.1f}ms {ratio:>10.1f} {p95 * 1000:>13.0f}ms  {verdict}")
    print(f"{missed} served page(s) miss a goal")


def report(rows):
    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"load average: {load}   CPU: this process (best of the repeats)")
    print("small: 4 experts x 4 metrics x 4 candidates   big: 100 experts x 20 metrics x 1,000 candidates")
    header = (
        f"{'page':<28} {'role':<8} {'bytes 4x4':>10} {'bytes big':>10} {'q 4x4':>5} {'q big':>5} "
        f"{'cpu 4x4':>8} {'cpu big':>8} {'cold big':>8} {'ratio':>6} {'goal':>5}  verdict"
    )
    print(header)
    print("-" * len(header))
    missed = 0
    for row in rows:
        a, b = row["small"], row["big"]
        ratio = b["cpu"] / a["cpu"] if a["cpu"] > 0 else float("inf")
        goal = EVERY_EXPERT_RATIO_GOAL if row["kind"] == "every expert" else RATIO_GOAL
        goal_text = f"{WHAT_IF_GOAL * 1000:.0f}ms" if row["kind"] == "what-if" else f"{goal:.0f}"
        if row["kind"] == "download":
            share = b["gzip"] / b["bytes"]
            verdict = f"gzip {share:.0%} of its bytes" + ("" if share <= GZIP_GOAL else " MISSES gzip")
            missed += share > GZIP_GOAL
        else:
            problems = []
            if b["bytes"] >= SIZE_GOAL:
                problems.append("size")
            if row["kind"] == "what-if" and b["cpu"] >= WHAT_IF_GOAL:
                problems.append(f"time ({WHAT_IF_GOAL * 1000:.0f} ms)")
            elif row["kind"] != "what-if" and ratio >= goal:
                problems.append("cpu")
            verdict = "MISSES " + ", ".join(problems) if problems else "ok"
            missed += bool(problems)
        print(
            f"{row['page']:<28} {row['role']:<8} {scale._figure(a['bytes'], 'bytes'):>10} "
            f"{scale._figure(b['bytes'], 'bytes'):>10} {a['queries']:>5} {b['queries']:>5} "
            f"{a['cpu'] * 1000:>6.1f}ms {b['cpu'] * 1000:>6.1f}ms {b['cold'] * 1000:>6.0f}ms {ratio:>6.1f} "
            f"{goal_text:>5}  {verdict}"
        )
    print(f"{missed} page(s) miss a goal")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="measure only the pages whose name contains this")
    parser.add_argument("--keep", action="store_true", help="keep both studies")
    parser.add_argument(
        "--plain", action="store_true", help="no prediction set nor elicited metric (the figures before issue 21)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="requests per big page (the small ones get twice)")
    parser.add_argument(
        "--served",
        type=int,
        default=30,
        metavar="N",
        help="then, served by gunicorn: N requests one at a time per page (0: not served)",
    )
    args = parser.parse_args()
    scale.setup_django(pathlib.Path(__file__).resolve().parent.parent)
    report(run(args.only, args.keep or bool(args.served), args.repeat, args.plain, served_requests=args.served))


if __name__ == "__main__":
    main()
