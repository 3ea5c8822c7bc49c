"""The OpenAPI document: generated from the code, committed, never stale, served by the runner."""

from __future__ import annotations

import json

from gateway_local import openapi
from gateway_local.template import read_template
from tests.conftest import ROOT, load_function


def test_the_committed_document_is_what_make_openapi_generates():
    for committed in (ROOT / "docs" / "openapi.json", openapi.SERVED_COPY):
        assert committed.read_text(encoding="utf-8") == openapi.render_document(), f"{committed} is stale: make openapi"


def test_every_route_of_the_template_is_documented_with_its_body_and_its_family_envelope():
    document = openapi.build()
    template = read_template(ROOT / "template.yaml")
    paths = document["paths"]
    for route in template.routes:
        if route.function == openapi.PAGES_FUNCTION or route.path in ("/", "/{proxy+}"):
            assert route.path not in paths  # a page or the catch-all 404, not an operation
            continue
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


def test_the_console_function_serves_the_document_swagger_ui_and_no_file_outside_its_folder():
    app = load_function("console")
    answer = app.serve("GET", "/openapi.json")
    assert answer["statusCode"] == 200 and json.loads(answer["body"]) == openapi.build()
    page = app.serve("GET", "/docs")
    assert page["statusCode"] == 200 and "swagger-ui-bundle.js" in page["body"]
    assert "http" not in page["body"].split("<body>")[1]  # nothing from another origin
    assert "script-src 'self'" in page["headers"]["Content-Security-Policy"]
    script = app.serve("GET", "/docs/swagger-ui-bundle.js")
    assert script["statusCode"] == 200 and script["headers"]["Content-Type"].startswith("text/javascript")
    assert len(script["body"]) > 500_000
    for path in ("/docs/../../app.py", "/docs/%2e%2e/app.py", "/console/../app.py", "/console//etc/passwd",
                 "/console/assets/nothing.js", "/app.py"):
        assert app.serve("GET", path)["statusCode"] == 404, path
    assert app.serve("POST", "/openapi.json")["statusCode"] == 405


def test_a_page_without_its_slash_is_sent_to_it_relative_to_the_stage():
    answer = load_function("console")._redirect_to_slash({"path": "/console"})
    assert answer is not None and answer["statusCode"] == 302 and answer["headers"]["Location"] == "console/"


def test_every_static_file_fits_in_a_lambda_answer():
    app = load_function("console")
    for path in app.STATIC.rglob("*"):
        if path.is_file():
            # The answer is JSON: the body escaped must stay under Lambda's 6 MB.
            assert len(json.dumps(path.read_text(encoding="utf-8"))) < 5_500_000, path
