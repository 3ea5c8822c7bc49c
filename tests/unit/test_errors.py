from pydantic import BaseModel, Field

import pytest

from gateway.errors import Dialect, InvalidRequest, NotFound, dialect_for_path, render
from gateway.validation import parse_body


@pytest.mark.parametrize("path,dialect", [
    ("/v1/chat/completions", Dialect.CHAT), ("/v1/messages", Dialect.MESSAGES),
    ("/v1beta/models/x:generateContent", Dialect.CONTENT), ("/alpha/v1/videos/text2video", Dialect.ALPHA),
    ("/gamma/api/v1/tasks/1", Dialect.GAMMA), ("/plants", Dialect.PLANTS), ("/api/user/self", Dialect.ACCOUNT),
    ("/v1/dashboard/billing/usage", Dialect.CHAT), ("/imgtask/task/1/fetch", Dialect.IMGTASK),
])
def test_dialect_is_chosen_by_path_prefix(path, dialect):
    assert dialect_for_path(path) is dialect


def test_each_dialect_renders_its_own_envelope():
    error = InvalidRequest("temperature: must be at most 2", param="temperature")
    assert render(error, Dialect.CHAT).body == {"error": {
        "message": "temperature: must be at most 2", "type": "invalid_request_error",
        "param": "temperature", "code": "invalid_request"}}
    assert render(error, Dialect.MESSAGES).body == {"type": "error", "error": {
        "type": "invalid_request_error", "message": "temperature: must be at most 2"}}
    assert render(error, Dialect.CONTENT).body["error"]["status"] == "INVALID_ARGUMENT"
    alpha = render(error, Dialect.ALPHA, request_id="r-1").body
    assert alpha["code"] != 0 and alpha["request_id"] == "r-1"
    assert render(error, Dialect.PLANTS).body == {"error": 400, "message": "temperature: must be at most 2"}
    assert render(NotFound("no such plant"), Dialect.PLANTS).status == 404
    assert "r-9" in render(error, Dialect.GAMMA, request_id="r-9").body["error"]["message"]


class _Body(BaseModel):
    id: int = Field(ge=0)
    name: str


@pytest.mark.parametrize("raw,needle", [
    ("", "required"), ("{not json", "not valid JSON"), ("[1]", "JSON object"),
    ('{"name": "x"}', "id: is required"), ('{"id": -1, "name": "x"}', "id: Input should be greater than or equal to 0"),
])
def test_bad_bodies_become_one_400_naming_the_field(raw, needle):
    with pytest.raises(InvalidRequest) as caught:
        parse_body(_Body, raw)
    assert needle in caught.value.message
