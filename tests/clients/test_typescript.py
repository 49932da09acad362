"""TypeScript types generated from the live schema with openapi-typescript,
compiled with ``tsc --strict`` against typed fixtures (issue 18, item 5).

``bundle.ts`` assigns the shipped study bundle (``workspace/demo/
case-study-1.json``, FORMATS.md's example) to ``StudyBundle`` and to the
bodies of the export answer and the import request, a run's results
document (individual scores included) to ``ResultsDocument`` and to the
results answer, and an expert's ranges to the ranges request body (which
must be required). ``wrong.ts`` assigns deliberately wrong literals, each
differing from a right one of ``bundle.ts`` in one place: each must be
refused, which proves the check can fail (a type such as
``Record<string, never>`` or ``unknown[]`` lets wrong data through, or
refuses the right data). One generation and one ``tsc`` run per session.
"""

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fixtures import CASE_STUDY_PATH

from .conftest import run_tool

# The session's fixture case_study_results computes a run in the test
# database, which pytest-django creates only for a session with database tests.
pytestmark = pytest.mark.django_db

# tsc's codes for a value refused by its type (not assignable, properties
# missing or unknown): what each wrong literal must meet, rather than, e.g.,
# a type that does not exist (TS2339), which fails the line for another reason.
REFUSED_VALUE = {"TS2322", "TS2739", "TS2740", "TS2741", "TS2353", "TS2559"}
# Each wrong literal of wrong.ts, by the marker that ends its line.
WRONG = {
    "WRONG attributes": "a bundle whose attributes are a string",
    "WRONG judgment": "an AHP judgment of two elements, not [row, column, value]",
    "WRONG rank": "a results document whose candidate's rank is a string",
    "WRONG export": "an export answer missing its title",
}

BUNDLE_TS = """\
import type {{ components, paths }} from "./schema";

type Schemas = components["schemas"];
type Json<T> = [T] extends [{{ content: {{ "application/json": infer Body }} }}] ? Body : never;

export const bundle: Schemas["StudyBundle"] = {bundle};

// The export answers a bundle, and the import takes one.
export const exported: Json<paths["/api/v1/studies/{{study_id}}/export/"]["get"]["responses"][200]> = bundle;
export const imported: Json<paths["/api/v1/studies/import/"]["post"]["requestBody"]> = bundle;

// An expert prioritising by AHP: judgments are [row, column, value].
export const ahpBundle: Schemas["StudyBundle"] = {{
  ...bundle,
  priorities: {{
    ...bundle.priorities,
    {expert}: {{ method: "ahp", judgments: {judgments} }},
  }},
}};

export const results: Schemas["ResultsDocument"] = {results};
export const answered: Json<paths["/api/v1/runs/{{run_id}}/results/"]["get"]["responses"][200]> = results;

// A required body: the type is not `... | undefined`.
export const ranges: Json<paths["/api/v1/studies/{{study_id}}/my/ranges/"]["put"]["requestBody"]> = {ranges};
"""

WRONG_TS = """\
import type {{ components, paths }} from "./schema";
import {{ bundle, results }} from "./bundle";

type Schemas = components["schemas"];
type Json<T> = [T] extends [{{ content: {{ "application/json": infer Body }} }}] ? Body : never;
type Exported = Json<paths["/api/v1/studies/{{study_id}}/export/"]["get"]["responses"][200]>;
const {{ title: _dropped, ...withoutTitle }} = bundle;

export const w1: Schemas["StudyBundle"] = {{ ...bundle, attributes: "Accuracy" }}; // WRONG attributes
export const w2: Schemas["StudyBundle"] = {{
  ...bundle,
  priorities: {{
    ...bundle.priorities,
    {expert}: {{ method: "ahp", judgments: [[{row}, {column}]] }}, // WRONG judgment
  }},
}};
export const w3: Schemas["ResultsDocument"] = {{
  ...results,
  candidates: [{{ ...results.candidates[0], rank: "first" }}], // WRONG rank
}};
export const w4: Exported = withoutTitle; // WRONG export
"""


@dataclass(frozen=True)
class Compiled:
    folder: Path
    returncode: int
    errors: list[tuple[str, int, str]]  # (file name, line, message)
    output: str

    def lines_of(self, file_name: str) -> list[str]:
        return (self.folder / file_name).read_text(encoding="utf-8").splitlines()


@pytest.fixture(scope="session")
def compiled(live_schema, node_tool, case_study_results, tmp_path_factory) -> Compiled:
    generator, tsc = node_tool("openapi-typescript"), node_tool("tsc")
    folder = tmp_path_factory.mktemp("typescript")
    # --array-length: an array with minItems and maxItems is typed as a tuple.
    generated = run_tool([generator, live_schema, "--output", folder / "schema.d.ts", "--array-length"])
    assert generated.returncode == 0, generated.stdout

    bundle = json.loads(CASE_STUDY_PATH.read_text(encoding="utf-8"))
    expert = bundle["experts"][0]
    row, column, *_ = [attribute["name"] for attribute in bundle["attributes"]]
    judgments = [[row, column, 3]]
    metric = next(m for m in bundle["metrics"] if m.get("default_range"))
    (folder / "bundle.ts").write_text(
        BUNDLE_TS.format(
            bundle=json.dumps(bundle, indent=1),
            expert=json.dumps(expert),
            judgments=json.dumps(judgments),
            results=json.dumps(case_study_results, indent=1),
            ranges=json.dumps({metric["name"]: metric["default_range"]}),
        ),
        encoding="utf-8",
    )
    (folder / "wrong.ts").write_text(
        WRONG_TS.format(expert=json.dumps(expert), row=json.dumps(row), column=json.dumps(column)), encoding="utf-8"
    )
    checked = run_tool(
        [
            tsc,
            "--strict",
            "--noEmit",
            "--pretty",
            "false",
            "--target",
            "es2022",
            "--module",
            "esnext",
            "--moduleResolution",
            "bundler",
            "bundle.ts",
            "wrong.ts",
        ],
        cwd=folder,
    )
    errors = [
        (match["file"], int(match["line"]), match["message"])
        for match in re.finditer(
            r"^(?P<file>[\w.]+)\((?P<line>\d+),\d+\): error (?P<message>.*)$", checked.stdout, re.M
        )
    ]
    return Compiled(folder=folder, returncode=checked.returncode, errors=errors, output=checked.stdout)


def test_the_shipped_bundle_and_a_results_document_type_check(compiled):
    """Everything but wrong.ts compiles with --strict: the generated types
    (schema.d.ts) and the right data in bundle.ts."""
    elsewhere = [error for error in compiled.errors if error[0] != "wrong.ts"]
    assert not elsewhere, "tsc --strict refused:\n" + "\n".join(f"{f}({n}): {m}" for f, n, m in elsewhere)
    # Errors tsc reports in another form would be missed above (indented
    # lines continue the message above them).
    unexpected = [
        line for line in compiled.output.splitlines() if line.strip() and not line.startswith((" ", "\t", "wrong.ts("))
    ]
    assert not unexpected, compiled.output
    assert "StudyBundle" in (compiled.folder / "schema.d.ts").read_text(encoding="utf-8")


def test_each_wrong_literal_fails_the_compile(compiled):
    lines = compiled.lines_of("wrong.ts")
    refused = {
        number for file, number, message in compiled.errors if file == "wrong.ts" and message[:6] in REFUSED_VALUE
    }
    accepted = [
        description
        for marker, description in WRONG.items()
        if not any(marker in lines[number - 1] for number in refused)
    ]
    assert compiled.returncode != 0
    assert not accepted, "tsc accepted: " + "; ".join(accepted) + "\n" + compiled.output
