"""The vendored front-end files: served by the app's static files, exactly
as vendored, and at the version their VERSION and README files state."""

import re
import urllib.request

import pytest

from tests.browser.support import REPO

VENDOR = REPO / "static" / "vendor"
# Each file's own statement of its version, as the published build writes it.
VENDORED = [
    ("htmx", "htmx.min.js", "htmx.org", re.compile(r'version:"([^"]+)"')),
    ("axe-core", "axe.min.js", "axe-core", re.compile(r"\A/\*! axe v(\S+)")),
]


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

    version = (VENDOR / folder / "VERSION").read_text(encoding="utf-8").strip()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{folder}/VERSION holds {version!r}, not a release version"
    found = embedded.findall(served.decode("utf-8"))
    assert found and set(found) == {version}, f"{filename} declares {sorted(set(found))}, VERSION says {version}"

    readme = (VENDOR / folder / "README.md").read_text(encoding="utf-8")
    assert f"`{package}`" in readme and f"Version: {version} " in readme
    index = (VENDOR / "README.md").read_text(encoding="utf-8")
    assert f"| `{folder}/` | `{package}` | {version} |" in index
    assert (VENDOR / folder / "LICENSE").stat().st_size > 0
