"""Benchmark of a whole site (not a test): issue 33, item 8.

Every other benchmark measures one study; this one measures the pages and
lists that every study, user and history record of a site could slow down:
the dashboard, the study list, the history, the admin's lists, the health
checks. It builds the viewer's own study (bench/pages.py's 4 experts x
4 metrics x 4 candidates, with an elicited metric and two runs) and
measures every page of the map (bench/pages.py's list, plus the pages it
leaves out that list what grows with the site: the history, the template
picker, the notifications, the tokens, the webhooks) as the designer, an
expert and the expert whose elicitation answers were cleared, every list
endpoint of the REST API (the GET operations of the OpenAPI schema whose
answer is a list or a page of one) as the designer and as the expert, and
every list of the admin, ``/health/`` and ``/metrics`` as staff, on this
*empty* site (the viewer's study alone). Then it fills the site around it
with bulk inserts (PostgreSQL ``COPY``, 20 to 40 seconds at full size on 2 busy cores):

* 50,000 users and 10,000 studies, each with its designer and 4 experts
  (50,000 memberships);
* 20,000 runs, two per study (the first failed, the second succeeded with
  an empty results document: nobody opens them, they are only there);
* 1,000,000 history records (django-simple-history tables, each with its
  study): 28 per study, 14 per membership and one per run;

runs ``ANALYZE`` and measures every page again. For each it prints the SQL
queries and the CPU time of this process (the best of a few requests after
one that warms the caches), the wall time (which includes PostgreSQL's
work, of the same best request), on the empty site and on the full one, and
the ratios, against the goal of issue 33: every page and list within 2x of
the empty site's CPU time and queries. Each query of the full site's
requests is then EXPLAINed, and a sequential scan of one of the big tables
(users, studies, memberships, runs and their history) is printed under the
page. Pages a role may not open (403, 404, 405) are left out, and what is
skipped is said at the end.

How to run it, from the repository root, on a PostgreSQL database of your
own (created and migrated; it is filled and emptied again)::

    createdb -h 127.0.0.1 -U postgres approve_site_bench
    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/approve_site_bench
    .venv/bin/python manage.py migrate
    .venv/bin/python bench/site.py                 # about 2 minutes
    .venv/bin/python bench/site.py --scale 0.05    # a twentieth of the site

``--scale F`` builds that fraction of the site (``--scale 0.01``: 100
studies, 500 users). ``--keep`` keeps the viewer's study, the filled site
and the empty site's figures (in ``--baseline``, a JSON file) for the next
``--keep`` run, which then only measures the full site (``--clean`` deletes
them). ``--only
SUBSTRING`` measures the pages whose name contains it; ``--save FILE``
writes the figures, ``--compare FILE`` prints a saved run's ratios beside
this one's (before and after a change).
"""

import argparse
import datetime
import io
import json
import os
import pathlib
import sys
import time
import warnings

for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import pages as map_pages  # noqa: E402  (bench/pages.py: the viewer's study and the map)
import scale  # noqa: E402  (bench/scale.py: the Django set-up)

GOAL = 2.0
STUDIES, USERS, RUNS_PER_STUDY, EXPERTS_PER_STUDY = 10_000, 50_000, 2, 4
STUDY_RECORDS, MEMBERSHIP_RECORDS, RUN_RECORDS = 28, 14, 1  # 1,000,000 history records at full size
PREFIX = "site-"  # the filler's usernames
STAFF = "bench-site-staff"
#: The tables that grow with the site: a sequential scan of one is flagged.
BIG_TABLES = {
    "auth_user",
    "workspace_study",
    "workspace_membership",
    "engine_run",
    "workspace_historicalstudy",
    "workspace_historicalmembership",
    "engine_historicalrun",
}


# --- the site ---------------------------------------------------------------------------------


def _copy(cursor, table, columns, rows):
    """``COPY table (columns) FROM STDIN`` of ``rows`` (tuples; None is NULL)."""

    def text(value):
        if value is None:
            return "\\N"
        if isinstance(value, bool):
            return "t" if value else "f"
        return str(value).replace("\\", "\\\\").replace("\t", " ").replace("\n", " ")

    buffer = io.StringIO()
    for row in rows:
        buffer.write("\t".join(text(value) for value in row))
        buffer.write("\n")
    buffer.seek(0)
    cursor.copy_expert(f"COPY {table} ({', '.join(columns)}) FROM STDIN", buffer)


def _next_ids(cursor, table, column="id"):
    cursor.execute(f"SELECT COALESCE(MAX({column}), 0) + 1 FROM {table}")
    return cursor.fetchone()[0]


def _reset_sequence(cursor, table, column="id"):
    cursor.execute(f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'), (SELECT MAX({column}) FROM {table}))")


def site_built():
    from django.contrib.auth.models import User

    return User.objects.filter(username__startswith=PREFIX).exists()


def fill(fraction):
    """The site around the viewer's study: users, studies with their
    memberships, runs and history records, by COPY, then ANALYZE. Returns
    what was made, counted."""
    from django.db import connection, transaction

    studies = max(1, round(STUDIES * fraction))
    users = max(studies + EXPERTS_PER_STUDY, round(USERS * fraction))
    now = datetime.datetime.now(datetime.UTC)
    stamp = now.isoformat()

    def ago(seconds):
        """A time in the site's past (its year of history: one row every so many seconds)."""
        return (now - datetime.timedelta(seconds=seconds)).isoformat()

    made = {}
    with transaction.atomic(), connection.cursor() as cursor:
        raw = cursor.cursor  # psycopg2's own, for copy_expert
        user0 = _next_ids(cursor, "auth_user")
        _copy(
            raw,
            "auth_user",
            ["id", "password", "is_superuser", "username", "first_name", "last_name", "email"]
            + ["is_staff", "is_active", "date_joined"],
            (
                (user0 + i, "!", False, f"{PREFIX}{i:06d}", "Site", f"User {i}", f"{PREFIX}{i:06d}@example.org")
                + (False, True, stamp)
                for i in range(users)
            ),
        )
        made["users"] = users
        study0 = _next_ids(cursor, "workspace_study")
        designer = [user0 + (s % users) for s in range(studies)]
        phases = ("draft", "voting", "assessment", "closed")
        _copy(
            raw,
            "workspace_study",
            ["id", "title", "description", "phase", "attribute_threshold", "metric_threshold", "created_at"]
            + ["updated_at", "designer_id", "ahp_weighting", "input_version", "quorum"],
            (
                (study0 + s, f"Site study {s}", "", phases[s % 4], 1, 1, ago(3000 * (studies - s)), stamp)
                + (designer[s], "column_means", 0, 0)
                for s in range(studies)
            ),
        )
        made["studies"] = studies
        membership0 = _next_ids(cursor, "workspace_membership")
        memberships = []  # (id, study, user, role)
        for s in range(studies):
            memberships.append((membership0 + len(memberships), study0 + s, designer[s], "designer"))
            # The designers are the first users, the experts the others in turn.
            for e in range(EXPERTS_PER_STUDY):
                user = user0 + studies + (s * EXPERTS_PER_STUDY + e) % (users - studies)
                memberships.append((membership0 + len(memberships), study0 + s, user, "expert"))
        _copy(
            raw,
            "workspace_membership",
            ["id", "role", "created_at", "user_id", "study_id", "status", "last_reminder_unreached", "absence"]
            + ["absence_reason"],
            ((m, role, stamp, user, study, "active", "", "", "") for m, study, user, role in memberships),
        )
        made["memberships"] = len(memberships)
        run0 = _next_ids(cursor, "engine_run")
        runs = [
            (run0 + s * RUNS_PER_STUDY + n, study0 + s, n + 1) for s in range(studies) for n in range(RUNS_PER_STUDY)
        ]
        _copy(
            raw,
            "engine_run",
            ["id", "status", "tolerance", "snapshot", "results", "error", "launched_at", "finished_at", "attempts"]
            + ["duration_seconds", "launched_by_id", "study_id", "number"],
            (
                (run, "succeeded" if number == RUNS_PER_STUDY else "failed", 1e-9)
                + (("{}", "{}", "") if number == RUNS_PER_STUDY else (None, None, "bench: not run"))
                + (ago(1500 * (len(runs) - run + run0)), stamp, 1, 0.5, designer[study - study0], study, number)
                for run, study, number in runs
            ),
        )
        made["runs"] = len(runs)
        history = 0
        _copy(
            raw,
            "workspace_historicalstudy",
            ["id", "history_study_id", "history_source", "title", "description", "phase", "attribute_threshold"]
            + ["metric_threshold", "ahp_weighting", "created_at", "history_date", "history_type", "designer_id"]
            + ["history_user_id", "quorum"],
            (
                (study0 + s, study0 + s, "page", f"Site study {s}", "", phases[s % 4], 1, 1, "column_means", stamp)
                + (ago(100 * ((studies - s) * STUDY_RECORDS - r)), "+" if r == 0 else "~")
                + (designer[s], designer[s], 0)
                for s in range(studies)
                for r in range(STUDY_RECORDS)
            ),
        )
        history += studies * STUDY_RECORDS
        _copy(
            raw,
            "workspace_historicalmembership",
            ["id", "history_study_id", "history_expert_id", "history_source", "role", "status", "created_at"]
            + ["last_reminder_unreached", "history_date", "history_type", "history_user_id", "study_id", "user_id"]
            + ["absence", "absence_reason"],
            (
                (m, study, m if role == "expert" else None, "page", role, "active", stamp, "")
                + (ago(40 * ((len(memberships) - n) * MEMBERSHIP_RECORDS - r)), "+" if r == 0 else "~")
                + (designer[study - study0], study, user, "", "")
                for n, (m, study, user, role) in enumerate(memberships)
                for r in range(MEMBERSHIP_RECORDS)
            ),
        )
        history += len(memberships) * MEMBERSHIP_RECORDS
        _copy(
            raw,
            "engine_historicalrun",
            ["id", "history_study_id", "history_source", "status", "tolerance", "error", "launched_at", "attempts"]
            + ["history_date", "history_type", "history_user_id", "launched_by_id", "study_id", "number"],
            (
                (run, study, "task", "succeeded" if number == RUNS_PER_STUDY else "failed", 1e-9, "", stamp, 1)
                + (ago(1500 * (len(runs) - run + run0)), "+", designer[study - study0], designer[study - study0])
                + (study, number)
                for run, study, number in runs
                for _ in range(RUN_RECORDS)
            ),
        )
        history += len(runs) * RUN_RECORDS
        made["history records"] = history
        for table in ("auth_user", "workspace_study", "workspace_membership", "engine_run"):
            _reset_sequence(cursor, table)
        for table in ("workspace_historicalstudy", "workspace_historicalmembership", "engine_historicalrun"):
            _reset_sequence(cursor, table, "history_id")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    return made


def empty_site():
    """Delete the filler (its studies cascade by the database's own rules:
    the rows the COPY made, by id)."""
    from django.contrib.auth.models import User
    from django.db import connection, transaction

    from workspace.models import Study

    users = list(User.objects.filter(username__startswith=PREFIX).values_list("pk", flat=True))
    studies = list(Study.objects.filter(designer_id__in=users).values_list("pk", flat=True))
    with transaction.atomic(), connection.cursor() as cursor:
        for table in ("workspace_historicalstudy", "workspace_historicalmembership", "engine_historicalrun"):
            cursor.execute(f"DELETE FROM {table} WHERE history_study_id = ANY(%s)", [studies])
        cursor.execute("DELETE FROM engine_run WHERE study_id = ANY(%s)", [studies])
        cursor.execute("DELETE FROM workspace_membership WHERE study_id = ANY(%s)", [studies])
        cursor.execute("DELETE FROM workspace_study WHERE id = ANY(%s)", [studies])
        cursor.execute("DELETE FROM django_admin_log WHERE user_id = ANY(%s)", [users])
        cursor.execute("DELETE FROM auth_user WHERE id = ANY(%s)", [users])


# --- the viewer ------------------------------------------------------------------------------


def viewer():
    """The viewer's study (bench/pages.py's small one), built or found again
    (``--keep``): (study, expert, runs, elicited metric, cleared expert)."""
    from engine.models import Run
    from evaluation.models import ElicitationAnswers, ElicitedMetric
    from workspace.models import Study

    designer = f"bench-designer-{map_pages.SMALL['candidates']}"
    study = Study.objects.select_related("designer").filter(designer__username=designer).order_by("pk").first()
    if study is None:
        return map_pages.build(map_pages.SMALL)
    expert, cleared = study.memberships.select_related("user").filter(role="expert").order_by("user__username")[:2]
    runs = list(Run.objects.filter(study=study, status="succeeded").order_by("pk").values_list("pk", flat=True))
    metric = ElicitedMetric.objects.select_related("metric").get(metric__study=study).metric
    assert not ElicitationAnswers.objects.get(expert=cleared, elicited_metric__metric=metric).answers
    return study, expert.user, runs, metric, cleared.user


def staff_user():
    from django.contrib.auth.models import User

    user = User.objects.filter(username=STAFF).first()
    return user or User.objects.create_superuser(username=STAFF, password=None, email="")


def webhook_of(study):
    from webhooks.models import Webhook

    hook = Webhook.objects.filter(study=study).first()
    if hook is None:
        hook = Webhook(study=study, url="https://hooks.example.org/approve", events=["run.succeeded"])
        hook.secret = "bench"
        hook.save()
    return hook


def api_lists(ids):
    """``[(name, url)]``: the schema's GET operations answered with a list
    or a page of one, their path filled from ``ids``; and the operations
    left out because a path parameter has no value here."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]
    found, skipped = [], []
    for path, operations in schema["paths"].items():
        get = operations.get("get")
        if get is None:
            continue
        content = get["responses"].get("200", {}).get("content", {})
        shape = next(iter(content.values()), {}).get("schema", {})
        if "$ref" in shape:
            shape = components[shape["$ref"].rsplit("/", 1)[-1]]
        listed = shape.get("type") == "array" or "results" in shape.get("properties", {})
        if not listed:
            continue
        try:
            found.append((f"API {path}", path.format(**ids)))
        except KeyError as missing:
            skipped.append(f"API {path}: no {missing.args[0]} to ask for")
    return found, skipped


def pages_of(study, expert_user, runs, metric, hook):
    """``[(name, method, url, data, who, phase)]``: bench/pages.py's map
    (its downloads included), the pages it leaves out that list what grows
    with the site, the API's lists, the admin's lists, the health checks."""
    from django.contrib import admin
    from django.urls import reverse

    s, run = study.pk, runs[-1]
    everything = [
        (name, method, url, data, who, phase)
        for name, method, url, data, who, _kind, phase in map_pages.pages(study, expert_user, runs, metric)
    ]
    both, designer = ("designer", "expert"), ("designer",)
    everything += [
        ("history", "get", f"/studies/{s}/history/", None, both, None),
        ("study new (template picker)", "get", "/studies/new/", None, both, None),
        ("study copy", "get", f"/studies/{s}/copy/", None, designer, None),
        ("study live", "get", f"/studies/{s}/live/?version=0", None, both, None),
        ("compare: choose", "get", f"/runs/{run}/compare/", None, both, None),
        ("webhooks", "get", f"/studies/{s}/webhooks/", None, designer, None),
        ("webhook", "get", f"/studies/{s}/webhooks/{hook.pk}/", None, designer, None),
        ("notifications", "get", "/notifications/", None, both, None),
        ("notification settings", "get", "/accounts/notifications/", None, both, None),
        ("API tokens", "get", "/accounts/tokens/", None, both, None),
        ("e-mail address", "get", "/accounts/email/", None, both, None),
    ]
    ids = {"study_id": s, "run_id": run, "metric_id": getattr(metric, "pk", 0), "webhook_id": hook.pk}
    api, skipped = api_lists(ids)
    everything += [(name, "get", url, None, both, None) for name, url in api]
    everything += [
        ("health", "get", "/health/", None, ("staff",), None),
        ("metrics", "get", "/metrics", None, ("staff",), None),
    ]
    everything.append(("admin index", "get", "/admin/", None, ("staff",), None))
    # The admin's searches of a foreign key (the study's designer, a membership's study), unsearched: the first page.
    for model, field in (("study", "designer"), ("membership", "study")):
        url = f"/admin/autocomplete/?app_label=workspace&model_name={model}&field_name={field}"
        everything.append((f"admin autocomplete {model}.{field}", "get", url, None, ("staff",), None))
    for model in admin.site._registry:
        label = f"admin {model._meta.app_label}.{model._meta.model_name}"
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        everything.append((label, "get", url, None, ("staff",), None))
    return everything, skipped


# --- measuring ---------------------------------------------------------------------------------


class Recorder:
    """Every SQL statement run (an execute wrapper), kept for EXPLAIN."""

    def __init__(self):
        self.statements = []

    def __call__(self, execute, sql, params, many, context):
        self.statements.append((sql, params, many))
        return execute(sql, params, many, context)


def measure(client, method, url, data, repeat):
    """Queries, the best CPU time of ``repeat`` requests (after one that warms
    the caches) with that request's wall time and statements; None if the
    role may not open the page, or what it answered instead of a page."""
    from django.db import connection

    def once():
        return map_pages.ask(client, method, url, data)

    first = once()
    if first.status_code in (403, 404, 405):
        return None
    if first.status_code not in (200, 204):
        return f"answered {first.status_code} {first.get('Location', '')}".strip()
    best = None
    for _ in range(repeat):
        recorder = Recorder()
        with connection.execute_wrapper(recorder):
            cpu, wall = time.process_time(), time.perf_counter()
            once()
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        if best is None or cpu < best["cpu"]:
            best = {"cpu": cpu, "wall": wall, "queries": len(recorder.statements), "statements": recorder.statements}
    return best


def sequential_scans(statements):
    """The big tables each statement's plan reads by a sequential scan:
    ``[(table, sql)]``, each pair once."""
    from django.db import connection

    def walk(node):
        if node.get("Node Type") == "Seq Scan" and node.get("Relation Name") in BIG_TABLES:
            yield node["Relation Name"]
        for child in node.get("Plans", []):
            yield from walk(child)

    found = {}
    with connection.cursor() as cursor:
        for sql, params, many in statements:
            if many or not sql.lstrip().upper().startswith("SELECT"):
                continue
            cursor.execute("EXPLAIN (FORMAT JSON) " + sql, params)
            plan = cursor.fetchone()[0]
            plan = json.loads(plan) if isinstance(plan, str) else plan
            for table in walk(plan[0]["Plan"]):
                found.setdefault((table, sql[:160]), None)
    return list(found)


def clients_for(study, expert_user, cleared_user):
    from django.test import Client

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
    from two_factor import verified_client  # tests/two_factor.py: staff sign in with a second factor

    clients = {}
    for role, user in (("designer", study.designer), ("expert", expert_user), ("cleared", cleared_user)):
        clients[role] = Client()
        clients[role].force_login(user)

    class Secure(Client):
        """Over HTTPS, as every request here (SECURE_SSL_REDIRECT): the code page's too."""

        def generic(self, *args, **kwargs):
            return super().generic(*args, **{**kwargs, "secure": True})

    clients["staff"] = verified_client(staff_user(), Secure())
    return clients


def measure_all(entries, clients, only, repeat, explain, study, skipped):
    """``{"name|role": figures}`` for every entry a role may open."""
    from django.db.models import F

    from workspace.models import Study

    figures = {}
    for name, method, url, data, who, phase in entries:
        name = f"{name} ({phase})" if phase else name
        if only and only not in name:
            continue
        if phase:  # Operators' tool, as bench/pages.py does.
            Study.objects.filter(pk=study.pk).update(phase=phase, updated_at=F("updated_at"))
        try:
            for role in who:
                got = measure(clients[role], method, url, data, repeat)
                if isinstance(got, str):
                    skipped.append(f"{name} as {role}: {got}")
                if not isinstance(got, dict):
                    continue
                statements = got.pop("statements")
                if explain:
                    got["scans"] = sequential_scans(statements)
                figures[f"{name}|{role}"] = got
        finally:
            if phase:
                Study.objects.filter(pk=study.pk).update(phase="assessment", updated_at=F("updated_at"))
    return figures


def report(empty, full, made, skipped, before=None):
    load = " ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"load average: {load}   CPU: this process (best of the repeats); wall: that request, PostgreSQL included")
    print("empty: the viewer's study alone   site: " + ", ".join(f"{n:,} {what}" for what, n in made.items()))
    header = (
        f"{'page':<58} {'role':<8} {'q empty':>7} {'q site':>6} {'cpu empty':>9} {'cpu site':>9} "
        f"{'wall empty':>10} {'wall site':>9} {'q ratio':>7} {'cpu ratio':>9}"
        + (f" {'cpu before':>10}" if before else "")
        + "  verdict"
    )
    print(header)
    print("-" * len(header))
    missed, left_out = 0, []
    for key, b in full.items():
        a = empty.get(key)
        page, role = key.split("|")
        if a is None:
            left_out.append(f"{page} as {role}: not measured on the empty site")
            continue
        q_ratio = b["queries"] / a["queries"] if a["queries"] else float(b["queries"] > 0) or 1.0
        cpu_ratio = b["cpu"] / a["cpu"] if a["cpu"] > 0 else float("inf")
        problems = [what for what, ratio in (("queries", q_ratio), ("cpu", cpu_ratio)) if ratio > GOAL]
        if b.get("scans"):
            problems.append("seq scan")
        verdict = "MISSES " + ", ".join(problems) if problems else "ok"
        missed += bool(problems)
        earlier = ""
        if before:
            was = before.get(key)
            earlier = f" {was['cpu ratio']:>10.2f}" if was else f" {'-':>10}"
        print(
            f"{page[:58]:<58} {role:<8} {a['queries']:>7} {b['queries']:>6} {a['cpu'] * 1000:>7.1f}ms "
            f"{b['cpu'] * 1000:>7.1f}ms {a['wall'] * 1000:>8.1f}ms {b['wall'] * 1000:>7.1f}ms "
            f"{q_ratio:>7.2f} {cpu_ratio:>9.2f}{earlier}  {verdict}"
        )
        for table, sql in b.get("scans", []):
            print(f"    seq scan of {table}: {sql}")
    print(f"{missed} page(s) miss the goal (queries and CPU within {GOAL:g}x of the empty site, no sequential scan)")
    for line in [*skipped, *left_out]:
        print(f"skipped: {line}")
    print(
        "skipped: POSTs that change something (only the previews and checks the map posts are measured); "
        "pages of other studies (404 to the viewer); the server (the test client in this process)"
    )


def rows_of(empty, full):
    rows = {}
    for key, b in full.items():
        a = empty.get(key)
        if a:
            rows[key] = {
                "empty": {k: a[k] for k in ("queries", "cpu", "wall")},
                "site": {k: b[k] for k in ("queries", "cpu", "wall")},
                "cpu ratio": b["cpu"] / a["cpu"] if a["cpu"] else None,
                "q ratio": b["queries"] / a["queries"] if a["queries"] else None,
                "scans": b.get("scans", []),
            }
    return rows


def forget(study, baseline):
    """Delete the filler, the viewer's study and staff user and the empty site's figures."""
    from workspace.models import Study

    empty_site()
    Study.objects.filter(pk=study.pk).delete()
    staff_user().delete()
    baseline.unlink(missing_ok=True)


def run(args):
    from django.conf import settings
    from django.db import connection
    from django.test import override_settings
    from django.test.utils import setup_test_environment

    warnings.filterwarnings("ignore", message="No directory at")
    setup_test_environment()
    plain = {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"}
    # /metrics answers the test client's address (its scrape, as a monitor's).
    override_settings(
        STORAGES={**settings.STORAGES, "staticfiles": plain}, METRICS_ALLOWED_NETWORKS=["127.0.0.1/32"]
    ).enable()
    baseline = pathlib.Path(args.baseline or f"/tmp/approve-site-empty-{connection.settings_dict['NAME']}.json")
    study, expert_user, runs, metric, cleared_user = viewer()
    if args.clean:
        forget(study, baseline)
        return
    hook = webhook_of(study)
    clients = clients_for(study, expert_user, cleared_user)
    entries, skipped = pages_of(study, expert_user, runs, metric, hook)
    built_before = site_built()
    try:
        if built_before:
            if not baseline.exists():
                sys.exit(f"the site is already filled and {baseline} has no empty site's figures: drop the database")
            saved = json.loads(baseline.read_text())
            empty, made = saved["empty"], saved["made"]
            print(f"the site was kept: the empty site's figures from {baseline}", file=sys.stderr)
        else:
            empty = measure_all(entries, clients, args.only, args.repeat * 2, False, study, [])
            started, cpu = time.perf_counter(), time.process_time()
            made = fill(args.scale)
            print(
                f"filled in {time.perf_counter() - started:.1f} s ({time.process_time() - cpu:.1f} s CPU here): {made}",
                file=sys.stderr,
            )
            if args.keep:
                baseline.write_text(json.dumps({"empty": empty, "made": made}))
        full = measure_all(entries, clients, args.only, args.repeat, True, study, skipped)
    finally:
        if not args.keep:
            forget(study, baseline)
    before = json.loads(pathlib.Path(args.compare).read_text()) if args.compare else None
    report(empty, full, made, skipped, before)
    if args.save:
        pathlib.Path(args.save).write_text(json.dumps(rows_of(empty, full), indent=1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="the fraction of the site to build (default 1)")
    parser.add_argument("--keep", action="store_true", help="keep the viewer's study, the site and the empty figures")
    parser.add_argument("--baseline", help="where --keep keeps the empty site's figures (a JSON file)")
    parser.add_argument("--only", default="", help="measure only the pages whose name contains this")
    parser.add_argument("--repeat", type=int, default=3, help="requests per page on the full site (empty: twice)")
    parser.add_argument("--save", help="write the figures to this JSON file")
    parser.add_argument("--clean", action="store_true", help="delete what --keep kept, measure nothing")
    parser.add_argument("--compare", help="a saved run's figures, printed beside (its CPU ratio)")
    args = parser.parse_args()
    scale.setup_django(pathlib.Path(__file__).resolve().parent.parent)
    run(args)


if __name__ == "__main__":
    main()
