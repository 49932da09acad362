"""The Content-Security-Policy: on every response, exact, and nothing the
site serves needs what it forbids (inline script, inline style)."""

import re
from pathlib import Path

from django.conf import settings as django_settings
from django.urls import reverse
from rest_framework.test import APIClient

from workspace import services

POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
)
TEMPLATES = Path(django_settings.BASE_DIR) / "templates"


def inline_code(html):
    """What the policy would block in a page: <script> without src, <style>
    elements, style="" attributes, on*="" handlers, javascript: URLs."""
    found = []
    for match in re.finditer(r"<script\b([^>]*)>", html, re.I):
        if not re.search(r"\bsrc\s*=", match.group(1), re.I):
            found.append(match.group(0))
    found += re.findall(r"<style\b[^>]*>", html, re.I)
    found += re.findall(r"<[a-z][^>]*\sstyle\s*=[^>]*>", html, re.I)
    found += re.findall(r"<[a-z][^>]*\son[a-z]+\s*=[^>]*>", html, re.I)
    found += re.findall(r"javascript:", html, re.I)
    return found


def test_the_setting_is_the_policy():
    assert django_settings.CONTENT_SECURITY_POLICY == POLICY
    middleware = django_settings.MIDDLEWARE
    assert middleware.index("workspace.middleware.ContentSecurityPolicyMiddleware") == (
        middleware.index("django.middleware.security.SecurityMiddleware") + 1
    )


def test_every_kind_of_response_carries_the_policy(client, cast, make_study):
    built = make_study()
    token, key = services.api_token_create(user=cast.alice)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    anonymous = {
        "login page": client.get(reverse("login")),
        "reset page": client.get(reverse("password_reset")),
        "redirect to login": client.get(reverse("home")),
        "page not found": client.get("/no/such/page/"),
        "admin login": client.get("/admin/login/"),
        "API 401": APIClient().get("/api/v1/studies/"),
        "API 404": APIClient().get("/api/v1/nothing/"),
        "API schema": client.get("/api/schema/"),
        "API docs": client.get("/api/docs/"),
        "API docs script": client.get("/api/docs/?script="),
    }
    api_answers = {
        "API list": api.get("/api/v1/studies/"),
        "API detail": api.get(f"/api/v1/studies/{built.study.pk}/"),
        "API 400": api.post("/api/v1/studies/", {}, format="json"),
    }
    client.force_login(cast.alice)
    pages = {
        "home": client.get(reverse("home")),
        "password": client.get(reverse("password_change")),
        "tokens": client.get(reverse("api_tokens")),
        "revoke": client.get(reverse("api_token_revoke", args=[token.pk])),
        "method not allowed": client.get(reverse("logout")),
    }
    statuses = {name: r.status_code for name, r in {**anonymous, **api_answers, **pages}.items()}
    assert statuses == {
        "login page": 200,
        "reset page": 200,
        "redirect to login": 302,
        "page not found": 404,
        "admin login": 200,
        "API 401": 401,
        "API 404": 404,
        "API schema": 200,
        "API docs": 200,
        "API docs script": 200,
        "API list": 200,
        "API detail": 200,
        "API 400": 400,
        "home": 200,
        "password": 200,
        "tokens": 200,
        "revoke": 200,
        "method not allowed": 405,
    }
    for name, response in {**anonymous, **api_answers, **pages}.items():
        assert response["Content-Security-Policy"] == POLICY, name


def test_our_pages_contain_nothing_the_policy_blocks(client, cast):
    token, _ = services.api_token_create(user=cast.alice, name="laptop")
    bodies = {"login": client.get(reverse("login")), "reset": client.get(reverse("password_reset"))}
    client.force_login(cast.alice)
    bodies |= {
        "home": client.get(reverse("home")),
        "password": client.get(reverse("password_change")),
        "tokens": client.get(reverse("api_tokens")),
        "token created": client.post(reverse("api_tokens"), {"name": "ci"}),
        "revoke": client.get(reverse("api_token_revoke", args=[token.pk])),
        "error": client.post(reverse("password_change"), {"old_password": "x"}),
    }
    for name, response in bodies.items():
        assert response.status_code == 200, name
        assert inline_code(response.content.decode()) == [], name


def test_no_template_has_inline_script_or_style():
    files = sorted(TEMPLATES.rglob("*.html"))
    assert len(files) >= 10
    offenders = {str(f.relative_to(TEMPLATES)): inline_code(f.read_text()) for f in files}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_the_inline_code_check_finds_what_it_should():
    # The check itself must be able to fail.
    assert len(inline_code('<script>alert(1)</script><script src="/a.js"></script>')) == 1
    assert len(inline_code('<p style="color:red">x</p><style>p{}</style>')) == 2
    assert len(inline_code('<button onclick="go()">x</button><a href="javascript:go()">y</a>')) == 2


def test_api_docs_load_their_start_up_script_from_a_url(client):
    page = client.get("/api/docs/")
    body = page.content.decode()
    assert inline_code(body) == []
    sources = re.findall(r'<script src="([^"]+)"', body)
    assert len(sources) == 3
    assert sources[-1] == "/api/docs/?script="
    stylesheets = re.findall(r'<link rel="stylesheet" href="([^"]+)"', body)
    assert any(s.endswith("swagger-ui.css") for s in stylesheets)
    assert "/static/css/api-docs.css" in stylesheets
    for source in sources[:2]:
        assert source.startswith("/static/drf_spectacular_sidecar/swagger-ui-dist/")
    script = client.get(sources[-1])
    assert script.status_code == 200 and script["Content-Type"].startswith("application/javascript")
    text = script.content.decode()
    assert "SwaggerUIBundle(" in text and '"/api/schema/"' in text
    # No badge from the public validator (another origin, blocked by img-src).
    assert '"validatorUrl": null' in text
