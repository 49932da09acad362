"""Client-generation tests: the live schema as an integrator downloads it,
fed to the generators integrators use (issue 18, item 5).

Fixtures (each made once per test session):

``live_schema``
    ``GET /api/schema/?format=json`` through Django's test client, written to
    a temporary ``schema.json``: exactly what an integrator downloads.
``python_client``
    ``openapi-python-client generate`` (the virtualenv's own executable, as a
    subprocess, configured by ``openapi-python-client.yaml`` next to this
    file) run on that schema into a temporary directory, which is put on
    ``sys.path`` for the session: the package ``approve_client``, unchanged.
``node_tool(name)``
    The path of a tool of ``tests/clients/node_modules/.bin`` (installed by
    ``npm ci`` in this folder; ``.ci/run`` does it). When Node or the tool is
    missing the test is *skipped* with the reason, except when the
    environment variable ``CI`` is set and not empty, where it *fails*: CI
    never passes without having run them (as the browser tests do).
``case_study_results``
    The ``approve-results/1`` document, individual scores included, of a
    run of the shipped case study (``workspace/demo/case-study-1.json``),
    computed in a transaction that is rolled back.
"""

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.db import transaction
from django.test import Client
from django.test.utils import override_settings

from engine.models import Run
from engine.selectors import results_json
from engine.services import run_execute, run_launch
from tests.fixtures import CASE_STUDY_PATH
from workspace.bundles import study_import_bundle

HERE = Path(__file__).resolve().parent
NODE_MODULES = HERE / "node_modules"
PYTHON_CLIENT_CONFIG = HERE / "openapi-python-client.yaml"
PACKAGE = "approve_client"
# Generous bounds for the generators: each takes seconds on a 2-core machine.
TOOL_TIMEOUT_SECONDS = 300


def run_tool(
    command: list[str | Path], *, cwd: Path | None = None, merge_stderr: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run a generator or checker; its output is kept for the assertions
    (stdout and stderr together, in order, unless ``merge_stderr`` is false)."""
    environment = {
        **os.environ,
        # Redocly CLI: no usage data sent, no "new version" notice.
        "REDOCLY_TELEMETRY": "off",
        "REDOCLY_SUPPRESS_UPDATE_NOTICE": "true",
        "NO_COLOR": "1",
    }
    return subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        text=True,
        timeout=TOOL_TIMEOUT_SECONDS,
        check=False,
    )


@pytest.fixture(scope="session")
def live_schema(tmp_path_factory: pytest.TempPathFactory) -> Path:
    with override_settings(ALLOWED_HOSTS=["testserver"]):
        response = Client().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200, response.content[:500]
    schema = json.loads(response.content)
    assert schema["openapi"].startswith("3.") and schema["paths"]
    path = tmp_path_factory.mktemp("schema") / "schema.json"
    path.write_text(json.dumps(schema, indent=2), encoding="utf-8")
    return path


def schema_operations(schema: dict) -> dict[tuple[str, str], str]:
    """``(METHOD, path)`` → operationId, for every operation of the schema."""
    methods = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}
    return {
        (method.upper(), path): operation["operationId"]
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if method in methods
    }


@dataclass(frozen=True)
class GeneratedClient:
    root: Path  # on sys.path; the package is root / PACKAGE
    output: str  # what the generator printed
    returncode: int


@pytest.fixture(scope="session")
def python_client(live_schema: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeneratedClient]:
    generator = Path(sys.executable).with_name("openapi-python-client")
    assert generator.exists(), f"{generator} is missing: install requirements-dev.txt (make install)"
    root = tmp_path_factory.mktemp("python-client")
    generated = run_tool(
        [
            generator,
            "generate",
            "--path",
            live_schema,
            "--config",
            PYTHON_CLIENT_CONFIG,
            "--meta",
            "none",
            "--output-path",
            root / PACKAGE,
        ]
    )
    assert generated.returncode == 0, f"openapi-python-client failed:\n{generated.stdout}"
    assert (root / PACKAGE / "__init__.py").exists(), generated.stdout
    sys.path.insert(0, str(root))
    try:
        yield GeneratedClient(root=root, output=generated.stdout, returncode=generated.returncode)
    finally:
        sys.path.remove(str(root))
        for name in [name for name in sys.modules if name == PACKAGE or name.startswith(PACKAGE + ".")]:
            del sys.modules[name]


@pytest.fixture(scope="session")
def node_tool() -> Callable[[str], Path]:
    def find(name: str) -> Path:
        tool = NODE_MODULES / ".bin" / name
        if shutil.which("node") is None:
            reason = "Node.js (node) is not installed"
        elif not tool.exists():
            reason = f"{tool.relative_to(HERE.parents[1])} is missing: run `npm ci` in tests/clients"
        else:
            return tool
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI is set, so the Node client checks may not be skipped", pytrace=False)
        pytest.skip(f"{reason} (these checks fail instead when CI is set)")

    return find


@pytest.fixture(scope="session")
def case_study_results(django_db_setup: None, django_db_blocker: object) -> dict:
    bundle = json.loads(CASE_STUDY_PATH.read_text(encoding="utf-8"))
    with django_db_blocker.unblock(), transaction.atomic():  # type: ignore[attr-defined]
        study = study_import_bundle(bundle=bundle)
        run = run_launch(study=study, launched_by=study.designer)
        run_execute(run_id=run.pk)
        run = Run.objects.get(pk=run.pk)
        assert run.status == Run.Status.SUCCEEDED, run.error
        document = json.loads(results_json(run=run, individual=True))
        transaction.set_rollback(True)
    return document
