"""Vertex AI: a channel's Google Cloud project and region, its service account, and the OAuth
access token minted from it.

A Vertex channel (`vertex: {project, region}` in the channels document, `docs/channels.md`)
holds a service-account key file (the JSON Google Cloud hands out) as its key. Its requests go to
the regional host `https://{region}-aiplatform.googleapis.com` (`aiplatform.googleapis.com` for
`global`), under `/v1/projects/{project}/locations/{region}/publishers/google/models/{model}`,
with `Authorization: Bearer <access token>` (Vertex AI REST reference; new-api's
`relay/channel/vertex/url_builder.go` builds the same addresses).

The token comes from google-auth (`google.oauth2.service_account.Credentials`: a JWT signed with
the key, exchanged at the key's `token_uri`, RFC 7523). It lives an hour, cached as every minted
token is (`upstreams/tokens.py`: until `TOKEN_MARGIN` before it expires, one refresh per service
account at a time).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from gateway.upstreams import tokens as tokens_base
from gateway.upstreams.errors import ACCOUNT, UPSTREAM, UpstreamError
from gateway.upstreams.tokens import TOKEN_MARGIN as TOKEN_MARGIN  # where Vertex's callers read it
from gateway.upstreams.tokens import TOKEN_TIMEOUT, first_line

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
_REGION = re.compile(r"^(global|[a-z]+(?:-[a-z0-9]+)+)$")


@dataclass(frozen=True)
class VertexSite:
    """Where a Vertex channel's models live."""

    project: str
    region: str

    @property
    def host_url(self) -> str:
        return ("https://aiplatform.googleapis.com" if self.region == "global"
                else f"https://{self.region}-aiplatform.googleapis.com")

    def model_path(self, model: str, action: str) -> str:
        return (f"/v1/projects/{quote(self.project, safe='')}/locations/{quote(self.region, safe='')}"
                f"/publishers/google/models/{quote(model.removeprefix('models/'), safe='')}:{action}")


def valid_region(region: str) -> bool:
    return bool(_REGION.fullmatch(region))


def service_account_info(api_key: str) -> dict[str, Any]:
    """The service-account key file a Vertex channel holds, checked; ValueError naming what is wrong."""
    try:
        info = json.loads(api_key)
    except ValueError:
        raise ValueError("a vertex channel's key must be a service-account key file (JSON)") from None
    if not isinstance(info, dict) or info.get("type") != "service_account":
        raise ValueError('a vertex channel\'s key must be a service-account key file ("type": "service_account")')
    missing = [name for name in ("client_email", "private_key", "token_uri") if not isinstance(info.get(name), str)
               or not info[name]]
    if missing:
        raise ValueError(f"the service-account key file lacks {', '.join(missing)}")
    return info


# ---- google-auth's transport over httpx -----------------------------------------------------------

def _transport():  # google-auth imported only when a Vertex token is made
    import google.auth.exceptions
    import google.auth.transport

    class Response(google.auth.transport.Response):
        def __init__(self, response: httpx.Response):
            self._response = response

        @property
        def status(self) -> int:
            return self._response.status_code

        @property
        def headers(self) -> Any:
            return self._response.headers

        @property
        def data(self) -> bytes:
            return self._response.content

    class Request(google.auth.transport.Request):
        """google-auth's HTTP seam, over one small httpx client (token exchanges are rare)."""

        def __init__(self, http: httpx.Client):
            self._http = http

        def __call__(self, url: str, method: str = "GET", body: Any = None, headers: Any = None,
                     timeout: Any = None, **kwargs: Any) -> Response:
            try:
                return Response(self._http.request(method, url, content=body, headers=headers,
                                                   timeout=TOKEN_TIMEOUT if timeout is None else timeout))
            except httpx.HTTPError as exc:
                raise google.auth.exceptions.TransportError(f"{type(exc).__name__}: {exc}") from exc

    return Request


class TokenCache(tokens_base.TokenCache):
    """Access tokens by service account (`upstreams/tokens.py`): google-auth's credentials, made
    once per key file, refreshed at the key's `token_uri`."""

    def prepare(self, api_key: str) -> Any:
        from google.oauth2 import service_account

        try:
            return service_account.Credentials.from_service_account_info(service_account_info(api_key),
                                                                         scopes=[SCOPE])
        except ValueError as exc:
            raise UpstreamError(401, f"the channel's service account cannot be used: {exc}", fault=ACCOUNT) from None

    def exchange(self, state: Any, http: httpx.Client) -> tuple[str, float]:
        import google.auth.exceptions

        try:
            state.refresh(_transport()(http))
        except google.auth.exceptions.RefreshError as exc:
            # The token endpoint refused the key (invalid_grant: a deleted key, a disabled
            # account, a bad signature): the channel's account. Its own trouble (retryable): not.
            retryable = bool(getattr(exc, "retryable", False))
            raise UpstreamError(503 if retryable else 401, f"the OAuth token endpoint refused the channel's service "
                                f"account: {first_line(exc)}", fault=UPSTREAM if retryable else ACCOUNT) from None
        except google.auth.exceptions.TransportError as exc:
            raise UpstreamError(None, f"the OAuth token endpoint could not be reached: {first_line(exc)}",
                                retryable=True) from None
        return str(state.token), _seconds_left(state.expiry)


def _seconds_left(expiry: Any) -> float:
    """Seconds until google-auth's `expiry` (a naive UTC datetime from the answer's `expires_in`),
    an hour if the answer named none."""
    if expiry is None:
        return 3600.0
    from datetime import UTC

    return expiry.replace(tzinfo=UTC).timestamp() - time.time()


_tokens = TokenCache()


def tokens() -> TokenCache:
    """This instance's token cache."""
    return _tokens
