"""A process made ready before it serves (issue 33, item 5;
docs/architecture.md, "Warm workers").

Without it each gunicorn worker paid 3.8-4.6 s on its first request: the
URLconf imports every view (and with them NumPy, the engine, scikit-learn's
metrics, pyarrow) and every template is compiled on first use. gunicorn
preloads the application (``preload_app`` in gunicorn.conf.py) and calls
``warm`` in its master before it forks the workers, which then share all of
it (copy-on-write). The heavy libraries the project imports on first use
rather than at start-up (``FIRST_USE``: scipy, scikit-learn, pyarrow; issue
33, item 6) are imported here too, and in a Celery worker's main process
before its pool forks (``imports_first_used``, from approve_site/celery.py),
so that no worker process pays them on its first request or task. Nothing
here opens a connection that a fork would share: the database connections
are closed at the end, whatever touched them.
"""

import gc
import importlib
import logging
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.db import connections
from django.template import engines

logger = logging.getLogger("approve.warm")

__all__ = ["FIRST_USE", "imports_first_used", "warm"]

#: The modules imported on first use, not by ``django.setup()`` (a
#: management command's start imports none of them;
#: tests/test_lean_setup.py checks it): each costs 0.15-0.9 s and 15-120 MiB.
FIRST_USE = (
    # engine.robustness: Kendall's tau, the elicited cells' sparse matrices
    "scipy.sparse",
    "scipy.stats",
    # evaluation.metrics and evaluation.report: scikit-learn's metrics
    "sklearn.exceptions",
    "sklearn.metrics",
    # evaluation.predictions: the Arrow reader (pyarrow), and tracking's artifacts
    "evaluation.predictions.arrow",
    "pyarrow.compute",
    "pyarrow.parquet",
)


def imports_first_used() -> float:
    """Import every module of ``FIRST_USE``; returns the seconds it took."""
    started = time.perf_counter()
    for name in FIRST_USE:
        importlib.import_module(name)
    return time.perf_counter() - started


def _template_names() -> Iterator[str]:
    """The name of every template of the project's own (its ``templates``
    folder and its apps'), not of the libraries' apps."""
    base, installed = Path(settings.BASE_DIR).resolve(), Path(sys.prefix).resolve()
    roots = [base / "templates"]
    for app in apps.get_app_configs():
        path = Path(app.path).resolve()
        if path.is_relative_to(base) and not path.is_relative_to(installed):
            roots.append(path / "templates")
    for root in roots:
        if root.is_dir():
            for path in sorted([*root.rglob("*.html"), *root.rglob("*.txt")]):
                yield path.relative_to(root).as_posix()


def _templates() -> int:
    """Compile every template once (the cached loader keeps them). One that
    does not compile stops the start: its pages would fail anyway."""
    engine = engines["django"]
    names = list(_template_names())
    for name in names:
        engine.get_template(name)
    return len(names)


def warm() -> dict[str, float]:
    """Load what the first request would (the module's docstring). Returns
    what it did: the seconds each step took and the number of templates
    compiled, which it logs."""
    from django.urls import get_resolver

    started = time.perf_counter()
    get_resolver().url_patterns  # noqa: B018  (imports every view and what they import)
    done: dict[str, float] = {"urls_seconds": time.perf_counter() - started}
    done["imports_seconds"] = imports_first_used()
    step = time.perf_counter()
    done["templates"] = _templates()
    done["templates_seconds"] = time.perf_counter() - step
    connections.close_all()
    # The heap so far (the imports, the URLconf, the compiled templates)
    # moved out of the cyclic collector's reach: a full collection in a
    # worker no longer walks its hundreds of thousands of objects (an
    # elicitation answer's worst 194-204 ms became 70-101 ms,
    # bench/elicitation.py), nor writes to their pages, which the forked
    # workers then keep sharing.
    gc.freeze()
    done["frozen_objects"] = gc.get_freeze_count()
    done["seconds"] = time.perf_counter() - started
    logger.info("warmed in %.2f s: %s", done["seconds"], done)
    return done
