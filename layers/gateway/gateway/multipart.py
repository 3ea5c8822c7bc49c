"""multipart/form-data over bytes, and the size rules of an upload that arrives through Lambda.

Why our own parser: the body of a buffered Lambda function is already in memory (API Gateway
hands it over base64-encoded once `multipart/form-data` is a binary media type), so a small
strict parser over bytes is all that is needed and it answers every malformation with a 400
that says what is wrong instead of a library's exception.

Strictness: the media type must be `multipart/form-data` with a `boundary`; lines end in CRLF;
every part has a `Content-Disposition: form-data; name="..."`; the body ends with the closing
delimiter `--<boundary>--`. A part with a `filename` parameter is a file, any other part a text
field (UTF-8). A text field is single-valued, so a text field's name sent twice is rejected
rather than silently picking one of the values, except an array field's (`name[]`, each item a
part, as the openai SDK sends them: `Form.values_named`); file parts may repeat a name (several images as
`image` or `image[]`, the forms SDKs send), and each form's rules say how many it takes.

Size rules, in the order they bite:

1. The Lambda event limit (413). A synchronous Lambda event is at most 6 MB *including* the
   base64 encoding of the body and the rest of the event (headers, request context). We keep
   `EVENT_ENVELOPE_ALLOWANCE` for the rest and allow what is left, decoded:
   `MAX_REQUEST_BYTES` = (6 MiB - 400 KiB) * 3/4 = 4,411,392 bytes (about 4.4 MB) of raw request
   body. A larger body gets `PayloadTooLarge` (413) stating that limit, so a request just below
   the hard wall fails the same clear way as one just above it. (A body far above it never
   reaches the function: API Gateway refuses the invoke itself; that is documented, not
   handled here.)
2. The image rule of the spec (400). An edit image must be under 10 MB
   (`gateway.schemas.images.MAX_IMAGE_BYTES`); it is a rule of the `image` field and is checked
   with the other field rules, naming `image`. Behind Lambda rule 1 always bites first; the
   field rule still holds for any other way in (tests, a larger transport).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from gateway.errors import InvalidRequest, PayloadTooLarge

LAMBDA_EVENT_LIMIT = 6 * 1024 * 1024
# Headers, request context and JSON framing of the event, which count against the same 6 MB.
EVENT_ENVELOPE_ALLOWANCE = 400 * 1024
# Base64 turns every 3 bytes into 4 characters.
MAX_REQUEST_BYTES = (LAMBDA_EVENT_LIMIT - EVENT_ENVELOPE_ALLOWANCE) // 4 * 3
# The same 6 MB bound a buffered answer's bytes (base64 too), with room for its headers.
MAX_BINARY_ANSWER_BYTES = LAMBDA_EVENT_LIMIT // 4 * 3 - 64 * 1024

# Our forms have a handful of fields; a cap keeps a hostile body from costing much.
MAX_PARTS = 32
MAX_PART_HEADER_BYTES = 8 * 1024

_CRLF = b"\r\n"


@dataclass(frozen=True)
class UploadedFile:
    filename: str
    content_type: str
    data: bytes = field(repr=False)

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass
class Form:
    fields: dict[str, str] = field(default_factory=dict)
    files: dict[str, UploadedFile] = field(default_factory=dict)  # the first file of each name
    more_files: dict[str, list[UploadedFile]] = field(default_factory=dict)  # later ones, in order
    more_fields: dict[str, list[str]] = field(default_factory=dict)  # an array field's (`name[]`) later values

    def values_named(self, name: str) -> list[str]:
        """Every value of a text field, an array field (`name[]`) sent once per item."""
        first = self.fields.get(name)
        return [first, *self.more_fields.get(name, [])] if first is not None else []

    def files_named(self, name: str) -> list[UploadedFile]:
        """Every file part sent under `name`, in order."""
        first = self.files.get(name)
        return [first, *self.more_files.get(name, [])] if first is not None else []


def _too_large(size: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"request body is {size} bytes; this endpoint accepts at most {MAX_REQUEST_BYTES} bytes "
        f"(about 4.4 MB) because a Lambda request event is limited to 6 MB after base64 encoding",
        code="request_too_large")


def check_request_size(size: int) -> None:
    """Raise the 413 of rule 1 when a raw request body of `size` bytes cannot be accepted."""
    if size > MAX_REQUEST_BYTES:
        raise _too_large(size)


def event_body(event: Mapping[str, Any]) -> bytes:
    """The raw request body of an API Gateway REST proxy event, size-checked (rule 1)."""
    body = event.get("body")
    if body is None:
        return b""
    if event.get("isBase64Encoded"):
        if isinstance(body, bytes):
            body = body.decode("ascii", "replace")
        # Checked before decoding so an oversized body costs nothing more.
        check_request_size(len(body) // 4 * 3)
        try:
            raw = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise InvalidRequest("request body is marked base64-encoded but is not valid base64") from None
    else:
        raw = body if isinstance(body, bytes) else body.encode("utf-8")
    check_request_size(len(raw))
    return raw


def event_header(event: Mapping[str, Any], name: str) -> str | None:
    """A request header of a REST proxy event, by case-insensitive name."""
    wanted = name.lower()
    for key, value in (event.get("headers") or {}).items():
        if key.lower() == wanted:
            return value
    for key, values in (event.get("multiValueHeaders") or {}).items():
        if key.lower() == wanted and values:
            return values[0]
    return None


def form_from_event(event: Mapping[str, Any]) -> Form:
    """The multipart form of a REST proxy event: body decoded, size-checked and parsed."""
    return parse_multipart(event_body(event), event_header(event, "content-type") or "")


# --- parsing ---------------------------------------------------------------------------------

# `; key=value` where value is a token or a quoted-string (backslash escapes a character).
_PARAM = re.compile(r';\s*([^\s=;]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)', re.S)
_BOUNDARY_CHARS = re.compile(r"^[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]$")


def _split_header_value(value: str) -> tuple[str, dict[str, str]]:
    """`form-data; name="a"; filename="b"` -> ("form-data", {"name": "a", "filename": "b"})."""
    main, _, rest = value.partition(";")
    params: dict[str, str] = {}
    for key, raw in _PARAM.findall(";" + rest):
        raw = raw.strip()
        if raw.startswith('"') and raw.endswith('"') and len(raw) >= 2:
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
        params[key.lower()] = raw
    return main.strip().lower(), params


def _boundary(content_type: str) -> bytes:
    media_type, params = _split_header_value(content_type or "")
    if media_type != "multipart/form-data":
        got = media_type or "none"
        raise InvalidRequest(f"Content-Type: must be multipart/form-data (got {got})")
    boundary = params.get("boundary")
    if not boundary:
        raise InvalidRequest("Content-Type: multipart/form-data needs a boundary parameter")
    if not _BOUNDARY_CHARS.match(boundary):
        raise InvalidRequest("Content-Type: the boundary must be 1 to 70 characters of the "
                             "multipart alphabet (RFC 2046)")
    return boundary.encode("ascii")


def _find_delimiter(body: bytes, delimiter: bytes, start: int) -> int:
    """Index of the next `CRLF--boundary` that really is a delimiter line, or -1."""
    needle = _CRLF + delimiter
    while True:
        at = body.find(needle, start)
        if at < 0:
            return -1
        after = body[at + len(needle): at + len(needle) + 2]
        # A delimiter is followed by `--` (the last one), padding or CRLF; anything else is data.
        if after[:2] == b"--" or after[:1] in (b"\r", b" ", b"\t"):
            return at
        start = at + 1


def _malformed(why: str) -> InvalidRequest:
    return InvalidRequest(f"malformed multipart body: {why}")


def _part_headers(block: bytes) -> dict[str, str]:
    if len(block) > MAX_PART_HEADER_BYTES:
        raise _malformed(f"a part's headers exceed {MAX_PART_HEADER_BYTES} bytes")
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError:
        raise _malformed("a part's headers are not valid UTF-8") from None
    headers: dict[str, str] = {}
    for line in text.split("\r\n") if text else []:
        name, colon, value = line.partition(":")
        if not colon or not name.strip() or name != name.strip():
            raise _malformed(f"a part has an invalid header line {line[:60]!r}")
        headers[name.lower()] = value.strip()
    return headers


def parse_multipart(body: bytes, content_type: str) -> Form:
    """Parse a multipart/form-data `body`; every problem is an `InvalidRequest` saying which."""
    delimiter = b"--" + _boundary(content_type)
    if body.startswith(delimiter):
        pos = len(delimiter)
    else:  # a preamble before the first delimiter is allowed (RFC 2046) and ignored
        first = _find_delimiter(body, delimiter, 0)
        if first < 0:
            raise _malformed("the opening boundary delimiter is missing")
        pos = first + len(_CRLF) + len(delimiter)

    form = Form()
    parts = 0
    while True:
        if body[pos:pos + 2] == b"--":
            break  # the closing delimiter; an epilogue after it is ignored
        while body[pos:pos + 1] in (b" ", b"\t"):
            pos += 1
        if body[pos:pos + 2] != _CRLF:
            raise _malformed("the closing boundary delimiter is missing")
        pos += 2
        end = _find_delimiter(body, delimiter, pos - 2)
        if end < 0:
            raise _malformed("the closing boundary delimiter is missing")
        if end < pos:  # an empty part: the delimiter follows the previous one directly
            raise _malformed("a part has no headers")
        parts += 1
        if parts > MAX_PARTS:
            raise _malformed(f"more than {MAX_PARTS} parts")
        _add_part(form, body[pos:end])
        pos = end + len(_CRLF) + len(delimiter)
    from gateway.validation import check_text_fields  # pydantic only where a body is parsed

    check_text_fields(form.fields)  # the JSON routes' text rule, for form fields too
    return form


def _add_part(form: Form, part: bytes) -> None:
    if part.startswith(_CRLF):
        raise _malformed("a part has no Content-Disposition header")
    split = part.find(_CRLF + _CRLF)
    if split < 0:
        raise _malformed("a part's headers are not followed by an empty line")
    headers = _part_headers(part[:split])
    data = part[split + 4:]

    disposition = headers.get("content-disposition")
    if disposition is None:
        raise _malformed("a part has no Content-Disposition header")
    kind, params = _split_header_value(disposition)
    if kind != "form-data":
        raise _malformed(f"a part's Content-Disposition is {kind!r}, not form-data")
    name = params.get("name")
    if not name:
        raise _malformed("a part's Content-Disposition has no name")
    is_file = "filename" in params or "filename*" in params
    if name in form.fields and not is_file and name.endswith("[]"):
        # An array field: the openai SDK sends `timestamp_granularities[]=word` and `=segment`
        # as two parts (`_base_client._serialize_multipartform`, array_format="brackets").
        try:
            form.more_fields.setdefault(name, []).append(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise InvalidRequest(f"{name}: a text field must be UTF-8", param=name) from None
        return
    if name in form.fields or (name in form.files and not is_file):
        raise InvalidRequest(f"{name}: is sent more than once; it takes a single value", param=name)

    if is_file:
        filename = params.get("filename", "")
        extended = params.get("filename*", "")
        if extended.lower().startswith("utf-8''"):  # RFC 5987 form wins over the plain one
            filename = unquote(extended[7:], encoding="utf-8", errors="replace")
        content_type = headers.get("content-type") or "application/octet-stream"
        upload = UploadedFile(filename=filename, content_type=content_type, data=data)
        if name in form.files:
            form.more_files.setdefault(name, []).append(upload)
        else:
            form.files[name] = upload
        return
    try:
        form.fields[name] = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidRequest(f"{name}: is not valid UTF-8 text", param=name) from None
