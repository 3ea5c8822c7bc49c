"""Rules every family's request models share: links, inline media, and rules checked after parsing.

- `http_url`: an http or https URL with a host.
- `base64_data`: bare base64, standard or URL-safe, padded or not, line breaks allowed (what the
  upstreams themselves decode); never a data: URL, never a length no decoder can read.
- `data_url`: `data:<type>/<subtype>[;...];base64,<base64 data>`, optionally of one media kind.
- `mime_type`: `<type>/<subtype>`; `Prompt`: a string that is not blank.
- `StrictBody` refuses unknown fields; `Problems` collects the violations of rules that need
  several fields, each at its own field location, so a 400 still names the field.
"""

from __future__ import annotations

import re
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictStr, ValidationError
from pydantic_core import InitErrorDetails, PydanticCustomError

_BASE64 = re.compile(r"[A-Za-z0-9+/_-]+")
_SPACE = re.compile(r"\s+")
_MIME = re.compile(r"[a-z]+/[A-Za-z0-9.+-]+")
_DATA_URL = re.compile(r"data:(?P<type>[a-z]+/[A-Za-z0-9.+-]+)(?:;[^;,]*)*;base64,(?P<data>.*)", re.DOTALL)


def not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


def http_url(value: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must be an http or https URL")
    return value


def base64_data(value: str) -> str:
    if value.startswith("data:"):
        raise ValueError("must be bare base64 data, not a data: URL")
    compact = _SPACE.sub("", value)
    bare = compact.rstrip("=")
    # A length of 1 mod 4 can never be decoded; anything outside the alphabet is not base64.
    if not bare or not _BASE64.fullmatch(bare) or len(bare) % 4 == 1 or len(compact) - len(bare) > 2:
        raise ValueError("must be non-empty base64 data")
    return value


def mime_type(value: str) -> str:
    if not _MIME.fullmatch(value):
        raise ValueError("must be a MIME type such as image/png or video/mp4")
    return value


def data_url(value: str, kind: str | None = None) -> str:
    """A base64 data: URL (of `kind` media, such as "image", when given)."""
    match = _DATA_URL.fullmatch(value)
    if not match or (kind is not None and match["type"].split("/")[0] != kind):
        raise ValueError(f"must be a data URL of the form data:{kind or '<type>'}/<format>;base64,<data>")
    try:
        base64_data(match["data"])
    except ValueError:
        raise ValueError("must carry non-empty base64 data after ;base64,") from None
    return value


def http_or_data_url(value: str) -> str:
    try:
        return data_url(value) if value.startswith("data:") else http_url(value)
    except ValueError:
        raise ValueError("must be an http(s) URL or a data: URL with base64 data") from None


Prompt = Annotated[StrictStr, Field(min_length=1), AfterValidator(not_blank)]
HttpUrl = Annotated[StrictStr, AfterValidator(http_url)]
Base64 = Annotated[StrictStr, AfterValidator(base64_data)]
HttpOrDataUrl = Annotated[StrictStr, AfterValidator(http_or_data_url)]
MimeType = Annotated[StrictStr, AfterValidator(mime_type)]


class StrictBody(BaseModel):
    # A misspelt field is a 400 rather than a silently dropped option.
    model_config = ConfigDict(extra="forbid")


class Problems:
    """Collects rule violations found after parsing, each at its own field location."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.errors: list[InitErrorDetails] = []

    def add(self, loc: tuple[str | int, ...], message: str, value: Any = None) -> None:
        # The message goes through the context so braces in it are never read as a template.
        self.errors.append(InitErrorDetails(
            type=PydanticCustomError("request_rule", "{message}", {"message": message}), loc=loc, input=value))

    def raise_if_any(self) -> None:
        if self.errors:
            raise ValidationError.from_exception_data(self.title, self.errors)
