"""A process made ready before it serves (issue 33, item 5;
approve_site/warm.py): every view imported, every template of the project
compiled and kept, no database connection left for a fork to share; and
gunicorn preloads by default (tests/test_observability.py starts a real one
and checks that it warms once, in its master)."""

import gc
import importlib.util
from pathlib import Path

from django.db import connections
from django.template import engines

from approve_site import warm as warm_module

ROOT = Path(__file__).resolve().parent.parent


def _gunicorn_conf():
    spec = importlib.util.spec_from_file_location("gunicorn_conf_under_test", ROOT / "gunicorn.conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    return conf


def _project_templates() -> set[str]:
    names = set()
    for root in [ROOT / "templates", *ROOT.glob("*/templates")]:
        names |= {p.relative_to(root).as_posix() for p in root.rglob("*") if p.suffix in (".html", ".txt")}
    return names


def test_warm_compiles_every_template_of_the_project_and_closes_the_connections(monkeypatch):
    closed = []
    # (an in-memory SQLite database, the tests' without DATABASE_URL, is never really closed)
    monkeypatch.setattr(connections, "close_all", lambda: closed.append(True))
    done = warm_module.warm()
    expected = _project_templates()
    assert done["templates"] == len(expected) > 100
    assert set(warm_module._template_names()) == expected
    # the cached loader holds each of them now: another get reads no file
    loader = engines["django"].engine.template_loaders[0]
    cached = {key.split("-")[0] if isinstance(key, str) else key for key in loader.get_template_cache}
    assert expected <= cached
    assert closed == [True]
    # the heap frozen out of the cyclic collector's reach, for the forks
    # (the count falls when a frozen object is freed later: a bound, not equality)
    assert done["frozen_objects"] > 100_000 and gc.get_freeze_count() > 100_000
    gc.unfreeze()


def test_gunicorn_preloads_by_default_and_warms_in_each_worker_when_told_not_to(monkeypatch):
    calls = []
    monkeypatch.setattr(warm_module, "warm", lambda: calls.append(True) or {})
    monkeypatch.delenv("GUNICORN_PRELOAD", raising=False)
    conf = _gunicorn_conf()
    assert conf.preload_app is True
    conf.when_ready(None)
    conf.post_worker_init(None)
    assert calls == [True]  # in the master only
    monkeypatch.setenv("GUNICORN_PRELOAD", "false")
    conf = _gunicorn_conf()
    assert conf.preload_app is False
    calls.clear()
    conf.when_ready(None)
    conf.post_worker_init(None)
    assert calls == [True]  # in the worker only
