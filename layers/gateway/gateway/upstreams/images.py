"""The chat protocol's image endpoints: generation (JSON) and editing (multipart).

The caller owns the `httpx.AsyncClient` (made once per execution environment and reused), so a
test can put the simulator behind it with `httpx.ASGITransport`.

Every failure is an `UpstreamError` saying whether another channel may be tried: connection
errors, timeouts and the statuses of `retryable_status` (408, 409, 429, 5xx) are retryable; the
channel's own account (OpenAI's error table, `upstreams/chat.py`) fails over; any other answer is
the upstream's verdict on the request itself. The API key is only ever sent in
the Authorization header and is scrubbed from every message, in case an upstream echoes it back.
"""

from __future__ import annotations

from typing import Any

import httpx

from gateway.multipart import UploadedFile
from gateway.upstreams.chat import ERRORS as OPENAI_ERRORS
from gateway.upstreams.errors import UpstreamError, parse_retry_after

_MESSAGE_MAX = 500  # an upstream's error text is relayed, not a whole HTML error page


class ImagesClient:
    def __init__(self, base_url: str, api_key: str, client: httpx.AsyncClient,
                 timeout: float | httpx.Timeout | None = None):
        self._base = base_url.rstrip("/")
        self._key = api_key
        self._client = client
        self._timeout = timeout

    async def generate(self, payload: dict[str, Any]) -> dict[str, Any]:
        """POST {base}/v1/images/generations with a JSON body; the upstream's JSON answer."""
        return await self._send("/v1/images/generations", json=payload)

    async def edit(self, fields: dict[str, str], files: list[tuple[str, UploadedFile]]) -> dict[str, Any]:
        """POST {base}/v1/images/edits as multipart: the text fields plus the files, each under its
        form name (`image`, `image[]` repeated, `mask`), in order."""
        parts = [(name, (f.filename or name.rstrip("[]"), f.data, f.content_type or "application/octet-stream"))
                 for name, f in files]
        return await self._send("/v1/images/edits", data=fields, files=parts)

    async def _send(self, path: str, **body: Any) -> dict[str, Any]:
        url = self._base + path
        extra: dict[str, Any] = {} if self._timeout is None else {"timeout": self._timeout}
        try:
            response = await self._client.post(
                url, headers={"Authorization": f"Bearer {self._key}"}, **body, **extra)
        except httpx.TimeoutException as exc:
            raise UpstreamError(None, self._scrub(f"upstream timed out ({type(exc).__name__}) on {path}"),
                                True, timed_out=True) from None
        except httpx.ConnectError:
            raise UpstreamError(None, f"could not connect to the upstream for {path}", True) from None
        except httpx.HTTPError as exc:
            # The request may have reached the upstream (a generation may be under way and paid
            # for), so another channel is not tried.
            raise UpstreamError(None, self._scrub(f"upstream connection failed on {path}: "
                                                  f"{type(exc).__name__}"), False) from None

        if response.status_code >= 400:
            # Whose fault, by OpenAI's own table (`upstreams/chat.py`): `insufficient_quota` or
            # `billing_hard_limit_reached` is the channel's account, not the client's request.
            raise OPENAI_ERRORS.error(response.status_code, self._scrub(self._error_text(response)),
                                      _json_or_none(response), retry_after=parse_retry_after(response.headers))
        try:
            answer = response.json()
        except ValueError:
            raise UpstreamError(response.status_code, f"upstream answered {path} with a body that is not JSON",
                                False) from None
        if not isinstance(answer, dict) or not isinstance(answer.get("data"), list):
            raise UpstreamError(response.status_code, f"upstream answered {path} without a data array", False)
        return answer

    @staticmethod
    def _error_text(response: httpx.Response) -> str:
        """The upstream's own message from its chat error envelope, else the status and a snippet."""
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict):
            error = body.get("error")
            if isinstance(error, dict) and isinstance(error.get("message"), str):
                return f"upstream {response.status_code}: {error['message'][:_MESSAGE_MAX]}"
            if isinstance(error, str):
                return f"upstream {response.status_code}: {error[:_MESSAGE_MAX]}"
        snippet = response.text[:200].strip()
        return f"upstream {response.status_code}" + (f": {snippet}" if snippet else "")

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "[redacted]") if self._key else text


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
