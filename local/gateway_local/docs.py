"""The API's own documentation on the local runner: GET /openapi.json (docs/openapi.json, as
`make openapi` generated it) and Swagger UI at GET /docs, its assets from the `swagger-ui-bundle`
package (nothing is fetched from the network)."""

from __future__ import annotations

from pathlib import Path

OPENAPI_PATH = "/openapi.json"
DOCS_PATH = "/docs"
_ASSETS = DOCS_PATH + "/assets/"
_ASSET_TYPES = {"swagger-ui.css": "text/css", "swagger-ui-bundle.js": "text/javascript",
                "swagger-ui-standalone-preset.js": "text/javascript", "favicon-32x32.png": "image/png"}

_PAGE = f"""<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Unified AI gateway: API</title>
  <link rel="stylesheet" href="{_ASSETS}swagger-ui.css">
  <link rel="icon" type="image/png" href="{_ASSETS}favicon-32x32.png">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="{_ASSETS}swagger-ui-bundle.js"></script>
  <script src="{_ASSETS}swagger-ui-standalone-preset.js"></script>
  <script>
    window.ui = SwaggerUIBundle({{url: "{OPENAPI_PATH}", dom_id: "#swagger-ui", deepLinking: true,
      presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset], layout: "StandaloneLayout"}});
  </script>
</body>
</html>
"""

Answer = tuple[int, list[tuple[str, str]], bytes]


def _assets_dir() -> Path | None:
    try:
        from swagger_ui_bundle import swagger_ui_path
    except ImportError:  # a runner without the dev extras still serves the API itself
        return None
    return Path(swagger_ui_path)


def answer(root: Path, method: str, path: str) -> Answer | None:
    """The documentation answer for a GET of `path`, or None when the path is not ours."""
    if method != "GET":
        return None
    if path == OPENAPI_PATH:
        document = root / "docs" / "openapi.json"
        if not document.is_file():
            return 404, [("content-type", "application/json")], b'{"message": "run make openapi"}'
        return 200, [("content-type", "application/json")], document.read_bytes()
    if path in (DOCS_PATH, DOCS_PATH + "/"):
        return 200, [("content-type", "text/html; charset=utf-8")], _PAGE.encode()
    if path.startswith(_ASSETS) and path[len(_ASSETS):] in _ASSET_TYPES:
        assets = _assets_dir()
        if assets is None:
            return 404, [("content-type", "text/plain")], b"install the dev extras for Swagger UI"
        name = path[len(_ASSETS):]
        return 200, [("content-type", _ASSET_TYPES[name])], (assets / name).read_bytes()
    return None
