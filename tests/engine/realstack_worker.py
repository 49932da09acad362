"""Test-only launcher for the real-stack tests: ``celery worker`` or ``celery
beat`` with two changes the product has no hook for.

* Every message the process sends (the sweep's, the sweep's re-sends of runs)
  goes to the test's private queue (``APPROVE_TEST_QUEUE``), so nothing else
  using the same Redis sees it.
* ``APPROVE_TEST_RUN_DELAY`` seconds (default 0) are slept in the engine's
  ``evaluate``, after the run has been claimed: the run stays "running"
  long enough for a test to kill the worker mid-run. A Monte Carlo
  analysis's chunk calls ``evaluate`` once too (the run's own evaluation,
  after the chunk is claimed), so a chunk stays "running" the same way.

    python tests/engine/realstack_worker.py worker --pool solo -Q QUEUE ...
    python tests/engine/realstack_worker.py beat --schedule PATH ...
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "approve_site.settings")

import django  # noqa: E402

django.setup()

from approve_site.celery import app  # noqa: E402
from engine import core  # noqa: E402

app.conf.task_default_queue = os.environ["APPROVE_TEST_QUEUE"]

delay = float(os.environ.get("APPROVE_TEST_RUN_DELAY", "0"))
if delay:
    evaluate = core.evaluate

    def slow_evaluate(**arrays):
        time.sleep(delay)
        return evaluate(**arrays)

    core.evaluate = slow_evaluate

if __name__ == "__main__":
    app.start(sys.argv[1:])
