"""A management command's start imports only what registration needs (issue
33, item 6): ``django.setup()`` runs every app's ``AppConfig.ready()``,
which registers functions and imports no heavy library; scipy,
scikit-learn, pyarrow, drf-spectacular's schema generator and DRF's
serializers are imported when first used (``approve_site.warm.FIRST_USE``),
and what is registered lazily still gives the same result."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

from approve_site import warm
from workspace import extensions

ROOT = Path(__file__).resolve().parent.parent

# Not imported by django.setup(): the heavy libraries, and the parts of
# drf-spectacular and DRF that only the API's pages and its schema need
# (``drf_spectacular`` and ``rest_framework`` themselves are installed apps,
# whose packages and checks Django imports; they are light).
HEAVY = (
    "scipy",
    "sklearn",
    "pyarrow",
    "mlflow",
    "drf_spectacular.openapi",
    "rest_framework.serializers",
    "rest_framework.views",
    "evaluation.predictions.arrow",
    "evaluation.api.computations",
    "accounts.otp.api_checks",
)

_SETUP = """
import json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "approve_site.settings")
import django
django.setup()
{after}
print(json.dumps(sorted(name for name in sys.modules if name in json.loads(sys.argv[1]))))
"""


def _imported_after(after: str = "", names: tuple[str, ...] = HEAVY) -> list[str]:
    """The modules of ``names`` imported by a fresh process once it has run
    ``django.setup()`` and then ``after``."""
    environment = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    done = subprocess.run(
        [sys.executable, "-c", _SETUP.format(after=after), json.dumps(list(names))],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_django_setup_imports_no_heavy_module() -> None:
    assert _imported_after() == []


def test_a_command_imports_no_heavy_module_before_it_runs() -> None:
    # A command's own module is imported (as for its --help) before it reads its file.
    after = (
        "from django.core.management import load_command_class\n"
        "load_command_class('evaluation', 'evaluate_predictions')"
    )
    assert _imported_after(after) == []


def test_the_first_use_modules_are_imported_by_the_warm_up() -> None:
    # What a gunicorn master and a Celery worker's main process import before they fork.
    first_use = tuple(sorted(warm.FIRST_USE))
    assert _imported_after(names=first_use) == []
    assert _imported_after("from approve_site.warm import imports_first_used; imports_first_used()", first_use) == list(
        first_use
    )


def test_the_evaluation_document_schema_is_registered_as_a_function() -> None:
    from evaluation.api.computations import EVALUATION_SCHEMA

    schema = extensions.SCHEMA_COMPONENTS["EvaluationDocument"]
    assert callable(schema)
    assert schema() is EVALUATION_SCHEMA


def test_the_openapi_schema_still_holds_the_evaluation_document(client, db) -> None:
    # (tests/api/test_schema_components.py checks that operations refer to it)
    from evaluation.api.computations import EVALUATION_SCHEMA

    answer = client.get("/api/schema/?format=json")
    assert answer.status_code == 200
    components = answer.json()["components"]["schemas"]
    document = components["EvaluationDocument"]
    assert document["description"] == EVALUATION_SCHEMA["description"]
    assert document["required"] == EVALUATION_SCHEMA["required"]
    # its nested schema marked x-component is hoisted, as when it was registered as a dict
    assert document["properties"]["format"] == {"$ref": "#/components/schemas/EvaluationFormat"}
    assert "EvaluationFormat" in components


def test_the_wilson_quantile_written_out_is_scipys() -> None:
    from scipy.stats import norm

    from engine.robustness import WILSON_Z

    assert float(norm.ppf(0.975)) == WILSON_Z
    assert math.isclose(WILSON_Z, 1.96, abs_tol=1e-3)


def test_the_metrics_scikit_learn_gives_are_evaluation_metrics_own() -> None:
    import sklearn.metrics

    from evaluation import metrics

    for name in metrics._SKLEARN:
        assert name in metrics.__all__
        assert getattr(metrics, name) is getattr(sklearn.metrics, name)
    try:
        metrics.no_such_metric  # noqa: B018
    except AttributeError as error:
        assert "no_such_metric" in str(error)
    else:
        raise AssertionError("an unknown name is an AttributeError")
