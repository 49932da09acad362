"""Every process of the site (web, workers, commands) runs BLAS single-threaded:
``approve_site`` sets the thread variables before numpy is first imported
(see approve_site/__init__.py for why)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What a worker or gunicorn does first: import the project package (celery -A
# approve_site, approve_site.wsgi), then Django and the engine bring numpy.
PROBE = """
import ctypes, glob, json, os, sys
import approve_site
numpy_before_site = "numpy" in sys.modules
import django
django.setup()
from engine import core
import numpy
found = glob.glob(os.path.join(os.path.dirname(numpy.__file__), "..", "numpy.libs", "*openblas64_*.so"))
threads = ctypes.CDLL(found[0]).scipy_openblas_get_num_threads64_() if found else None
print(json.dumps({
    "numpy_before_site": numpy_before_site,
    "env": [os.environ.get(v) for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")],
    "openblas_threads": threads,
}))
"""


def probe(**env):
    variables = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    clean = {k: v for k, v in os.environ.items() if k not in variables}
    result = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**clean, "DJANGO_SETTINGS_MODULE": "approve_site.settings", **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout)


def test_site_processes_run_blas_single_threaded():
    report = probe()
    assert report["numpy_before_site"] is False
    assert report["env"] == ["1", "1", "1"]
    if report["openblas_threads"] is not None:  # numpy's bundled OpenBLAS: ask it directly
        assert report["openblas_threads"] == 1


def test_an_operator_may_still_choose():
    assert probe(OPENBLAS_NUM_THREADS="2")["env"][0] == "2"
