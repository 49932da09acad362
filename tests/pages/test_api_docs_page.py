"""The API documentation page leads back to the site (issue 16, finding 10)."""

import re


def test_the_api_docs_page_links_back_to_the_site(client):
    body = client.get("/api/docs/").content.decode()
    nav = re.search(r'<nav class="api-docs-bar" aria-label="Site">(.*?)</nav>', body, re.S)
    assert nav, "no link bar above Swagger UI"
    links = {text: href for href, text in re.findall(r'<a[^>]*href="([^"]+)"[^>]*>([^<]+)</a>', nav.group(1))}
    assert links == {
        "← approve: your studies": "/",
        "API tokens": "/accounts/tokens/",
        "OpenAPI schema": "/api/schema/",
    }
    assert body.index("api-docs-bar") < body.index('id="swagger-ui"')
