import pytest
from pydantic import BaseModel, Field

from gateway.errors import (
    AuthenticationFailed,
    Dialect,
    InvalidRequest,
    NotFound,
    RateLimited,
    dialect_for_path,
    render,
)
from gateway.validation import parse_body


@pytest.mark.parametrize("path,dialect", [
    ("/v1/chat/completions", Dialect.CHAT), ("/v1/messages", Dialect.MESSAGES),
    ("/v1beta/models/x:generateContent", Dialect.CONTENT), ("/alpha/v1/videos/text2video", Dialect.ALPHA),
    ("/gamma/api/v1/tasks/1", Dialect.GAMMA), ("/beta/v1/get_result/x", Dialect.BETA), ("/plants", Dialect.PLANTS),
    ("/api/user/self", Dialect.ACCOUNT),
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
    assert render(error, Dialect.GAMMA, request_id="r-9").body == {
        "request_id": "r-9", "code": "InvalidParameter", "message": "temperature: must be at most 2"}
    assert render(error, Dialect.BETA).body == {"detail": "temperature: must be at most 2"}


def test_a_gamma_call_without_a_token_answers_the_api_error_with_the_request_id():
    # Given no token at all (a wrong one is InvalidApiKey in the upstream's own shape)
    missing = AuthenticationFailed("no API key was given", code="missing_api_key")
    # When rendered for a gamma route
    rendered = render(missing, Dialect.GAMMA, request_id="r-7")
    # Then it is the spec's envelope, with the request id in the message
    assert rendered.status == 401 and rendered.body["error"]["type"] == "api_error"
    assert "r-7" in rendered.body["error"]["message"]
    assert render(AuthenticationFailed("the API key is not valid"), Dialect.GAMMA, "r-8").body == {
        "request_id": "r-8", "code": "InvalidApiKey", "message": "the API key is not valid"}
    assert render(RateLimited("slow down"), Dialect.GAMMA, "r-9").body["code"] == "Throttling"


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
