"""The vendored third-party files: the front-end ones served by the app's
static files, exactly as vendored; the test tools (tests/tools) never
served; each at the version its VERSION and README files state."""

import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.browser.support import AXE_JS, REPO

VENDOR = REPO / "static" / "vendor"
TOOLS = REPO / "tests" / "tools"
# Each file's own statement of its version, as the published build writes it.
VENDORED = [
    ("htmx", "htmx.min.js", "htmx.org", re.compile(r'version:"([^"]+)"')),
]
TEST_TOOLS = [
    ("axe-core", "axe.min.js", "axe-core", re.compile(r"\A/\*! axe v(\S+)")),
]


def assert_version_stated(index: Path, folder: str, filename: str, package: str, embedded: re.Pattern) -> None:
    """The file declares the version of its VERSION file, which its README
    and the index (``index``, the README of the folder above) state too."""
    root = index.parent
    version = (root / folder / "VERSION").read_text(encoding="utf-8").strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{folder}/VERSION holds {version!r}, not a release version"
    found = embedded.findall((root / folder / filename).read_text(encoding="utf-8"))
    assert found and set(found) == {version}, f"{filename} declares {sorted(set(found))}, VERSION says {version}"

    readme = (root / folder / "README.md").read_text(encoding="utf-8")
    assert f"`{package}`" in readme and f"Version: {version} " in readme
    assert f"| `{folder}/` | `{package}` | {version} |" in index.read_text(encoding="utf-8")
    assert (root / folder / "LICENSE").stat().st_size > 0


@pytest.mark.parametrize(("folder", "filename", "package", "embedded"), VENDORED, ids=[v[0] for v in VENDORED])
def test_vendored_file_is_served_and_matches_its_version(
    live_server, folder: str, filename: str, package: str, embedded: re.Pattern
) -> None:
    local = VENDOR / folder / filename
    with urllib.request.urlopen(f"{live_server.url}/static/vendor/{folder}/{filename}", timeout=10) as response:
        assert response.status == 200
        assert response.headers.get_content_type() == "text/javascript"
        served = response.read()
    assert served == local.read_bytes()
    assert_version_stated(VENDOR / "README.md", folder, filename, package, embedded)


@pytest.mark.parametrize(("folder", "filename", "package", "embedded"), TEST_TOOLS, ids=[v[0] for v in TEST_TOOLS])
def test_test_tool_is_not_served_and_matches_its_version(
    live_server, folder: str, filename: str, package: str, embedded: re.Pattern
) -> None:
    assert not (VENDOR / folder).exists(), f"{folder} is a test tool: it belongs in tests/tools, not static/"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{live_server.url}/static/vendor/{folder}/{filename}", timeout=10)
    assert refused.value.code == 404
    assert_version_stated(TOOLS / "README.md", folder, filename, package, embedded)


def test_the_browser_tests_load_axe_from_the_test_tools() -> None:
    assert AXE_JS == TOOLS / "axe-core" / "axe.min.js"
    assert AXE_JS.is_file()
