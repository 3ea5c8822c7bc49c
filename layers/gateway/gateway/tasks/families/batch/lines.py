"""A batch input file, checked line by line at upload, and what its hold needs (`FileSummary`).

The rules (OpenAI's Batch API, `batch_create_params.py` and the `BatchRequestInput` schema of
openai-openapi; the one-model rule from OpenAI's batch guide): every non-blank line is one JSON
object `{custom_id, method: "POST", url, body}`; `custom_id` a string of 1..64 characters,
unique in the file; `url` one of the endpoints the gateway batches, the same on every line;
`body` valid for that route (the route's own request model, `stream` refused); one `model` in
the whole file; at most 50,000 requests and 200 MB. The first broken line is refused with its
number (`line N: ...`) and a code (llama-stack's reference implementation's where it has one:
`invalid_json_line`, `missing_required_parameter`, `invalid_url`, `streaming_unsupported`,
`invalid_request`; ours: `duplicate_custom_id`, `mismatched_model`, `too_many_requests`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from gateway.errors import InvalidRequest, shown
from gateway.validation import parse_json, parse_model

#: The endpoints a batch may run, and the route each line's body is checked against.
ENDPOINTS = ("/v1/chat/completions", "/v1/embeddings", "/v1/responses")
MAX_LINES = 50_000
MAX_FILE_BYTES = 200 * 1024 * 1024
MAX_CUSTOM_ID = 64
#: A line that sets no output limit is held for this many tokens per choice (as `api/text` holds
#: a synchronous request that sets none).
DEFAULT_OUTPUT_TOKENS = 4096


@dataclass(frozen=True)
class FileSummary:
    """What a batch of this file holds at submit, without reading the file again."""

    lines: int
    url: str
    model: str
    input_tokens: int  # the gateway's estimate, summed over the lines
    output_tokens: int  # every line's worst case (its output limit times its choices), summed

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(cls, stored: dict[str, Any]) -> FileSummary:
        return cls(lines=int(stored["lines"]), url=str(stored["url"]), model=str(stored["model"]),
                   input_tokens=int(stored["input_tokens"]), output_tokens=int(stored["output_tokens"]))


@dataclass(frozen=True)
class Line:
    number: int  # 1-based, counting every line of the file (blank ones too)
    custom_id: str
    url: str
    body: dict[str, Any]


def _refuse(number: int, message: str, code: str) -> InvalidRequest:
    return InvalidRequest(f"line {number}: {message}", param="file", code=code)


def _request_model(url: str) -> type:
    from gateway.schemas.text.chat import ChatRequest  # pydantic only where a file is checked
    from gateway.schemas.text.embeddings import EmbeddingsRequest
    from gateway.schemas.text.responses import ResponsesRequest

    return {"/v1/chat/completions": ChatRequest, "/v1/embeddings": EmbeddingsRequest,
            "/v1/responses": ResponsesRequest}[url]


def read_lines(data: bytes) -> Iterator[Line]:
    """Every request of a file the gateway wrote or checked before (no rule is checked again)."""
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if raw.strip():
            value = parse_json(raw, f"line {number}")
            yield Line(number, value["custom_id"], value["url"], value["body"])


def _request_line(number: int, raw: bytes) -> dict[str, Any]:
    """One line's own rules: a JSON object with its four fields, each of its kind."""
    try:
        value = parse_json(raw, "the line")
    except InvalidRequest as exc:
        raise _refuse(number, f"not a valid JSON line: {exc.message}", "invalid_json_line") from None
    if not isinstance(value, dict):
        raise _refuse(number, "must be a JSON object {custom_id, method, url, body}", "invalid_request")
    for name in ("custom_id", "method", "url", "body"):
        if name not in value:
            raise _refuse(number, f"{name} is required", "missing_required_parameter")
    custom_id = value["custom_id"]
    if not isinstance(custom_id, str) or not 0 < len(custom_id) <= MAX_CUSTOM_ID:
        raise _refuse(number, f"custom_id must be a string of 1 to {MAX_CUSTOM_ID} characters", "invalid_request")
    if value["method"] != "POST":
        raise _refuse(number, "method must be POST", "invalid_request")
    if value["url"] not in ENDPOINTS:
        raise _refuse(number, f"url '{shown(value['url'])}' is not one of {', '.join(ENDPOINTS)}", "invalid_url")
    if not isinstance(value["body"], dict):
        raise _refuse(number, "body must be a JSON object", "invalid_request")
    if value["body"].get("stream"):
        raise _refuse(number, "body.stream: a batch's requests cannot stream", "streaming_unsupported")
    return value


def check_file(data: bytes) -> FileSummary:
    """The summary of a valid batch input file, or a 400 naming the first broken line."""
    if len(data) > MAX_FILE_BYTES:
        raise InvalidRequest(f"a batch input file is at most {MAX_FILE_BYTES} bytes (got {len(data)})",
                             param="file", code="file_too_large")
    return check_lines(data.split(b"\n"))


def split_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """A file read in chunks (a presigned upload's object, streamed), cut at each newline as
    `check_file` cuts it, so a line's number is the same either way."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *whole, pending = pending.split(b"\n")
        yield from whole
    yield pending


def check_lines(raw_lines: Iterable[bytes]) -> FileSummary:
    """`check_file` on a file's lines (without their newlines)."""
    seen: set[str] = set()
    url = model = None
    input_tokens = output_tokens = 0
    for number, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            continue
        if len(seen) == MAX_LINES:
            raise _refuse(number, f"a batch holds at most {MAX_LINES} requests", "too_many_requests")
        value = _request_line(number, raw)
        custom_id = value["custom_id"]
        if custom_id in seen:
            raise _refuse(number, f"custom_id '{shown(custom_id)}' is used by an earlier line; each must be unique",
                          "duplicate_custom_id")
        seen.add(custom_id)
        if url is not None and value["url"] != url:
            raise _refuse(number, f"url '{value['url']}' differs from the file's first request ('{url}'); "
                          "a batch runs one endpoint", "invalid_url")
        url = value["url"]
        try:
            request: Any = parse_model(_request_model(url), value["body"])
        except InvalidRequest as exc:
            raise _refuse(number, f"body.{exc.message}", "invalid_request") from None
        if model is not None and request.model != model:
            raise _refuse(number, f"body.model '{shown(request.model)}' differs from the file's first request "
                          f"('{shown(model)}'); a batch runs one model", "mismatched_model")
        model = request.model
        input_tokens += request.estimate_input_tokens()
        if url != "/v1/embeddings":
            output_tokens += (request.output_limit() or DEFAULT_OUTPUT_TOKENS) * request.choices()
    if url is None or model is None:
        raise InvalidRequest("a batch input file holds at least one request line", param="file",
                             code="empty_file")
    return FileSummary(lines=len(seen), url=url, model=model, input_tokens=input_tokens, output_tokens=output_tokens)
