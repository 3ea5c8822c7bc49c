"""The console's and the API docs' static pages: GET /console/... (the single-page app built
from console/ into static/console), GET /docs/... (Swagger UI 5 from swagger-ui-dist, into
static/docs) and GET /openapi.json (docs/openapi.json, copied here by `make openapi`).

Only files under static/ are served, by exact name (no path walks out of it); every page gets a
strict Content-Security-Policy (nothing from another origin, no inline script). A page path
without its trailing slash is redirected to it, relative to the request (the stage's base path
stays), so that the pages' relative asset links resolve under any base path.
"""

from __future__ import annotations

import json
import mimetypes
from pathlib import Path
from typing import Any

from aws_lambda_powertools.logging import correlation_paths

from gateway import observability

STATIC = Path(__file__).resolve().parent / "static"
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".json": "application/json", ".svg": "image/svg+xml",
          ".txt": "text/plain; charset=utf-8"}
_SECURITY = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
                               "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
                               "base-uri 'self'; form-action 'self'",
    "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin", "X-Frame-Options": "DENY",
}
_PAGES = ("console", "docs")


def _answer(status: int, body: str, content_type: str, **headers: str) -> dict[str, Any]:
    return {"statusCode": status, "headers": {"Content-Type": content_type, **_SECURITY, **headers},
            "body": body, "isBase64Encoded": False}


def _not_found(path: str) -> dict[str, Any]:
    return _answer(404, json.dumps({"error": {"message": f"no page {path[:200]}", "type": "invalid_request_error",
                                              "param": None, "code": "route_not_found"}}), "application/json")


def static_file(relative: str) -> Path | None:
    """The file under static/ named by `relative` (a text type we serve), or None."""
    if not relative or relative.startswith("/") or "\\" in relative or "\0" in relative:
        return None
    if any(part in ("", ".", "..") for part in relative.split("/")):
        return None
    candidate = (STATIC / relative).resolve()
    if not candidate.is_relative_to(STATIC) or not candidate.is_file() or candidate.suffix not in _TYPES:
        return None
    return candidate


def serve(method: str, path: str) -> dict[str, Any]:
    if method not in ("GET", "HEAD"):
        return _answer(405, json.dumps({"error": {"message": f"{method} is not allowed here", "type":
                                                  "invalid_request_error", "param": None, "code": None}}),
                       "application/json", Allow="GET, HEAD")
    path = "/" + path.strip("/") if path.endswith("/") else path
    page = path.strip("/").split("/", 1)[0]
    if path == "/openapi.json":
        found = static_file("openapi.json")
        if found is None:
            return _not_found(path)
        return _answer(200, found.read_text(encoding="utf-8"), "application/json", **{"Cache-Control": "no-cache"})
    if page not in _PAGES:
        return _not_found(path)
    relative = path.strip("/")
    if relative == page:  # the page itself: its index, under a trailing slash
        return _answer(200, (STATIC / page / "index.html").read_text(encoding="utf-8"), _TYPES[".html"],
                       **{"Cache-Control": "no-cache"})
    found = static_file(relative)
    if found is None:
        return _not_found(path)
    # Vite names its assets by their content hash: they never change under one name.
    cache = "public, max-age=31536000, immutable" if "/assets/" in relative else "no-cache"
    return _answer(200, found.read_text(encoding="utf-8"), _TYPES.get(found.suffix) or
                   mimetypes.guess_type(found.name)[0] or "text/plain", **{"Cache-Control": cache})


def _redirect_to_slash(event: dict[str, Any]) -> dict[str, Any] | None:
    path = event.get("path") or ""
    if path.strip("/") in _PAGES and not path.endswith("/"):
        # Relative to the request: behind a stage (/v1/console) it becomes /v1/console/.
        location = path.rstrip("/").rsplit("/", 1)[-1] + "/"
        return {"statusCode": 302, "headers": {"Location": location, **_SECURITY}, "body": "",
                "isBase64Encoded": False}
    return None


@observability.lambda_handler(correlation_id_path=correlation_paths.API_GATEWAY_REST)
def lambda_handler(event, context):
    return _redirect_to_slash(event) or serve(event.get("httpMethod") or "GET", event.get("path") or "/")
