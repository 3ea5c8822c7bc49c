"""The OpenAPI document: generated from the code, committed, never stale, served by the runner."""

from __future__ import annotations

import json

from gateway_local import docs, openapi
from gateway_local.template import read_template
from tests.conftest import ROOT


def test_the_committed_document_is_what_make_openapi_generates():
    committed = (ROOT / "docs" / "openapi.json").read_text(encoding="utf-8")
    assert committed == openapi.render_document(), "docs/openapi.json is stale: run `make openapi`"


def test_every_route_of_the_template_is_documented_with_its_body_and_its_family_envelope():
    document = openapi.build()
    template = read_template(ROOT / "template.yaml")
    paths = document["paths"]
    for route in template.routes:
        if route.path == "/v1beta/models/{proxy+}":
            for action in openapi.CONTENT_ACTIONS:
                assert "post" in paths[f"/v1beta/models/{{model}}:{action}"]
            continue
        operation = paths[route.path][route.method.lower()]
        if route.method == "POST":
            assert operation["requestBody"]["content"], route.path
        assert operation["responses"]["400"]["content"]["application/json"]["schema"]["$ref"].startswith(
            "#/components/schemas/")
    assert paths["/v1/messages"]["post"]["responses"]["400"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/MessagesError"}
    assert paths["/plants"]["post"]["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/NewPlant"}
    chat = document["components"]["schemas"]["ChatRequest"]
    assert chat["properties"]["max_tokens"]["anyOf"][0]["maximum"] == 1_000_000


def test_the_runner_serves_the_document_and_swagger_ui_from_the_installed_package():
    status, headers, body = docs.answer(ROOT, "GET", "/openapi.json")
    assert status == 200 and json.loads(body)["openapi"].startswith("3.")
    status, headers, page = docs.answer(ROOT, "GET", "/docs")
    assert status == 200 and b"SwaggerUIBundle" in page and b"http" not in page.split(b"<body>")[1]
    status, headers, script = docs.answer(ROOT, "GET", "/docs/assets/swagger-ui-bundle.js")
    assert status == 200 and headers == [("content-type", "text/javascript")] and len(script) > 100_000
    assert docs.answer(ROOT, "GET", "/docs/assets/../../../etc/passwd") is None
    assert docs.answer(ROOT, "POST", "/openapi.json") is None
