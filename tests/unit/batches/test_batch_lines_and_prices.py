"""A batch input file's rules (the first broken line's number), its hold, and the batch price
rounded once per line."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from gateway.errors import InvalidRequest
from gateway.prices import SHIPPED, Price, batch_price, parse_option, token_cost
from gateway.tasks.engine import NewTask
from gateway.tasks.families.batch import FAMILY, line_units
from gateway.tasks.families.batch.lines import DEFAULT_OUTPUT_TOKENS, MAX_LINES, check_file, check_lines, split_lines

CHAT = "/v1/chat/completions"


def line(custom_id="a", url=CHAT, **body) -> dict:
    return {"custom_id": custom_id, "method": "POST", "url": url,
            "body": {"model": "m-small", "messages": [{"role": "user", "content": "hi"}], **body}}


def jsonl(*lines) -> bytes:
    return "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines).encode()


def refusal(data: bytes) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as refused:
        check_file(data)
    assert refused.value.param == "file"
    return refused.value


@pytest.mark.parametrize("second, code, start", [
    ("{not json", "invalid_json_line", "line 3: not a valid JSON line"),
    ('["a list"]', "invalid_request", "line 3: must be a JSON object"),
    ({"custom_id": "b", "method": "POST", "url": CHAT}, "missing_required_parameter", "line 3: body is required"),
    (line("a"), "duplicate_custom_id", "line 3: custom_id 'a' is used by an earlier line"),
    (line("x" * 65), "invalid_request", "line 3: custom_id must be a string of 1 to 64"),
    ({**line("b"), "method": "GET"}, "invalid_request", "line 3: method must be POST"),
    (line("b", url="/v1/completions"), "invalid_url", "line 3: url '/v1/completions' is not one of"),
    (line("b", url="/v1/embeddings") | {"body": {"model": "m-small", "input": "x"}}, "invalid_url",
     "line 3: url '/v1/embeddings' differs from the file's first request"),
    (line("b", stream=True), "streaming_unsupported", "line 3: body.stream"),
    (line("b", temperature=7), "invalid_request", "line 3: body.temperature"),
    (line("b", model="m-large"), "mismatched_model", "line 3: body.model 'm-large' differs"),
])
def test_the_first_broken_line_is_refused_with_its_number_and_code(second, code, start):
    # Given a good first line, a blank line, then a broken one (line numbers count every line)
    refused = refusal(jsonl(line("a"), "", second, "{also broken"))
    assert (refused.code, refused.message[:len(start)]) == (code, start), refused.message


@pytest.mark.parametrize("size", [1, 2, 7, 64, 1 << 20])
def test_a_file_read_in_chunks_is_cut_into_the_same_numbered_lines(size):
    # A presigned upload's bytes are streamed (api/uploads): whatever the chunks, the same lines
    data = jsonl(line("a"), "", line("b", max_tokens=5)) + b"\n\n" + jsonl(line("a"))[:-1]
    chunks = [data[i:i + size] for i in range(0, len(data), size)]
    assert list(split_lines(chunks)) == data.split(b"\n")
    with pytest.raises(InvalidRequest) as refused:
        check_lines(split_lines(chunks))
    assert refused.value.message == refusal(data).message and refused.value.message.startswith("line 6:")


def test_an_empty_file_and_one_past_the_line_limit_are_refused():
    assert refusal(b"\n \n").code == "empty_file"
    many = b"".join(json.dumps(line(f"c{n}")).encode() + b"\n" for n in range(MAX_LINES + 1))
    refused = refusal(many)
    assert (refused.code, refused.message.split(":")[0]) == ("too_many_requests", f"line {MAX_LINES + 1}")


def test_a_valid_file_is_summarised_for_its_hold():
    summary = check_file(jsonl(line("a", max_tokens=10, n=2), line("b")))
    assert (summary.lines, summary.url, summary.model) == (2, CHAT, "m-small")
    assert summary.output_tokens == 10 * 2 + DEFAULT_OUTPUT_TOKENS and summary.input_tokens > 0
    # The hold: every line's worst case at the batch price, and a unit a line for its own rounding
    new = NewTask(family="batch", model="m-small", upstream_request={}, route="/v1/batches",
                  quantities=summary.as_dict())
    price = SHIPPED["m-small"]
    assert FAMILY.units_to_hold(new, price) == token_cost(
        batch_price(price), input_tokens=summary.input_tokens, output_tokens=summary.output_tokens) + 2


def test_the_batch_price_is_half_by_default_and_the_models_own_ratio_otherwise():
    price = SHIPPED["m-large"]
    half = batch_price(price)
    assert (half.input_per_million, half.output_per_million, half.cached_input_per_million) == (
        Decimal("1.5"), Decimal("7.5"), Decimal("0.15"))
    assert batch_price(Price.of({"input_per_million": 4, "batch_ratio": "0.25"})).input_per_million == 1
    assert parse_option('{"m-x": {"input_per_million": 1, "batch_ratio": 1}}')["m-x"].batch_ratio == 1
    with pytest.raises(ValueError, match="batch_ratio: a batch's share of the price"):
        parse_option('{"m-x": {"input_per_million": 1, "batch_ratio": 2}}')


def test_each_line_is_rounded_up_once_as_a_synchronous_request_is():
    # 20 input + 10 output tokens of m-small: 12.5 units synchronously (13), 6.25 in a batch (7)
    price = SHIPPED["m-small"]
    body = {"usage": {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}}
    assert token_cost(price, input_tokens=20, output_tokens=10) == 13
    assert line_units(price, CHAT, body) == 7
    # four such lines cost 28, not half of four synchronous requests (26): the rule is per line
    assert 4 * line_units(price, CHAT, body) == 28
    # a responses line reads the responses usage; cached tokens at the (halved) cached rate
    responses = {"usage": {"input_tokens": 1000, "output_tokens": 0, "input_tokens_details": {"cached_tokens": 1000}}}
    assert line_units(price, "/v1/responses", responses) == 13  # 1000 x 0.025 USD/M = 12.5 units, rounded up


def test_a_batch_prefers_a_chat_channel_and_runs_embeddings_only_there():
    from gateway.routing.channel import Channel

    def channel(name: str, protocol: str) -> Channel:
        return Channel(name=name, protocol=protocol, base_url="https://x", api_key="k", models=frozenset({"*"}))

    anthropic, openai = channel("a", "messages"), channel("o", "chat")
    chat = NewTask(family="batch", model="m-small", upstream_request={"endpoint": CHAT}, route="/v1/batches")
    assert FAMILY.usable_channels([anthropic, openai], chat) == [openai, anthropic]
    embed = NewTask(family="batch", model="m-embed", upstream_request={"endpoint": "/v1/embeddings"},
                    route="/v1/batches")
    assert FAMILY.usable_channels([anthropic, openai], embed) == [openai]
    with pytest.raises(InvalidRequest, match="no channel that runs embedding batches"):
        FAMILY.usable_channels([anthropic], embed)


def test_a_batch_runs_on_the_gateway_only_where_no_channel_of_its_model_has_a_batch_api():
    from gateway.routing.channel import Channel

    def channel(name: str, protocol: str) -> Channel:
        return Channel(name=name, protocol=protocol, base_url="https://x", api_key="k", models=frozenset({"*"}))

    from gateway.upstreams.vertex import VertexSite

    openai, azure = channel("o", "chat"), channel("z", "azure")
    vertex = Channel(name="g", protocol="content", base_url="", api_key="{}", models=frozenset({"*"}),
                     vertex=VertexSite(project="p", region="us-central1"))

    def new(endpoint: str = CHAT) -> NewTask:
        return NewTask(family="batch", model="m-small", upstream_request={"endpoint": endpoint}, route="/v1/batches",
                       quantities=check_file(jsonl(line("a", max_tokens=10))).as_dict())

    # An upstream batch API wins, at the batch price; the channels the gateway would run are left out
    mixed = new()
    assert FAMILY.usable_channels([azure, openai, vertex], mixed) == [openai]
    assert mixed.quantities["self_run"] is False
    # None has one: the gateway runs it, held (and settled) at the full price unless a ratio is set
    alone = new()
    assert FAMILY.usable_channels([azure, vertex], alone) == [vertex, azure]
    price = SHIPPED["m-small"]
    assert FAMILY.units_to_hold(alone, price) == token_cost(price, input_tokens=alone.quantities["input_tokens"],
                                                            output_tokens=10) + 1
    assert FAMILY.units_to_hold(alone, Price(input_per_million=Decimal("0.5"), output_per_million=Decimal("1.5"),
                                             batch_ratio=Decimal("0.5"))) == FAMILY.units_to_hold(mixed, price)
    # Embedding lines: on a chat channel's batch API, or run on an azure channel, never on a Vertex content channel
    assert FAMILY.usable_channels([vertex, azure], new("/v1/embeddings")) == [azure]
