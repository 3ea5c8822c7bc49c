from collections import Counter

import pytest

from gateway.errors import NotFound
from gateway.routing import channels, failover
from gateway.routing.catalog import Catalog
from gateway.routing.channel import ChannelsConfigError
from gateway.upstreams.errors import UpstreamError

DOC = {
    "channels": [
        {"name": "main", "protocol": "chat", "base_url": "http://127.0.0.1:9001/", "api_key": "sk-up",
         "models": ["m-small", "m-large"], "model_map": {"m-small": "upstream-small"}, "priority": 1, "weight": 3},
        {"name": "spare", "protocol": "chat", "base_url": "http://127.0.0.1:9002", "api_key": "k",
         "models": ["m-small"],
         "priority": 1, "weight": 1},
        {"name": "fallback", "protocol": "messages", "base_url": "http://127.0.0.1:9003", "api_key": "k",
         "models": ["m-small"], "priority": 0},
    ],
    "prices": {"m-small": {"input_per_million": 1, "output_per_million": 2}},
}


@pytest.fixture(autouse=True)
def fresh_health():
    channels.reset_catalog()
    yield
    channels.reset_catalog()


def test_priority_first_then_weighted_random_inside_a_priority():
    catalog = Catalog.from_document(DOC)
    firsts = Counter(catalog.candidates("m-small", ["chat", "messages"])[0].name for _ in range(2000))
    assert set(firsts) == {"main", "spare"} and 2.2 < firsts["main"] / firsts["spare"] < 4.0
    assert catalog.candidates("m-small", ["chat", "messages"])[-1].name == "fallback"
    mapped = {c.name: c.upstream_model("m-small") for c in catalog.candidates("m-small", ["chat"])}
    assert mapped == {"main": "upstream-small", "spare": "m-small"}


def test_a_cooling_channel_is_skipped_while_another_serves_the_model():
    catalog = Catalog.from_document(DOC)
    for _ in range(3):
        failover.report_failure(catalog.named("main"), UpstreamError(500, "down"))
    assert [c.name for c in catalog.candidates("m-small", ["chat", "messages"])] == ["spare", "fallback"]
    assert [c.name for c in catalog.candidates("m-large", ["chat"])] == ["main"]  # nothing else serves it


def test_a_channel_that_keeps_failing_over_is_cooled_down_for_the_next_requests():
    # Given two channels of one priority, one of which answers every attempt with a 503
    from gateway.routing.failover import first_success
    from gateway.settings import get_settings
    from gateway.upstreams.errors import UpstreamError

    catalog = Catalog.from_document(DOC)
    failing = catalog.candidates("m-small", ["chat"])[0].name

    def attempt(channel):
        if channel.name == failing:
            raise UpstreamError(503, "overloaded")
        return "answer"

    # When requests fail over past it as many times as the cooldown rule counts (the real health
    # bookkeeping, no stand-in), each one still answered by the other channel
    failures = 0
    while failures < get_settings().channel_failures:
        order = catalog.candidates("m-small", ["chat"])
        answer, served_by = first_success(order, attempt)
        assert answer == "answer" and served_by.name != failing
        failures += order[0].name == failing
    # Then every next request skips the cooled one while the other serves the model
    for _ in range(50):
        assert failing not in [c.name for c in catalog.candidates("m-small", ["chat"])]


def test_an_unserved_model_is_not_found_by_name():
    with pytest.raises(NotFound, match="'m-unknown'"):
        Catalog.from_document(DOC).candidates("m-unknown", ["chat"])


def test_credentials_never_show_in_a_channels_repr():
    assert "sk-up" not in repr(Catalog.from_document(DOC).channels)


@pytest.mark.parametrize("change,needle", [
    ({"protocol": "smoke"}, "protocol"), ({"base_url": "ftp://x"}, r"http\(s\) URL"), ({"models": []}, "models"),
    ({"weight": -1}, "weight"), ({"colour": "red"}, "not a known field"),
])
def test_a_bad_document_fails_loudly_naming_the_field(change, needle):
    doc = {"channels": [{**DOC["channels"][0], **change}]}
    with pytest.raises(ChannelsConfigError, match=needle):
        Catalog.from_document(doc)


def test_simulated_catalog_serves_any_model_preferring_the_clients_protocol():
    catalog = Catalog.simulated("http://127.0.0.1:3001")
    first = catalog.candidates("m-large", ["chat", "messages", "content"], prefer="messages")[0]
    assert (first.protocol, first.base_url) == ("messages", "http://127.0.0.1:3001/messages")


def test_the_document_is_read_from_the_file_named_in_the_environment(tmp_path, monkeypatch):
    from gateway.settings import reload_settings

    path = tmp_path / "channels.yaml"
    path.write_text("channels:\n"
                    "  - {name: a, protocol: chat, base_url: 'http://127.0.0.1:1', api_key_env: UP_KEY,"
                    " models: [m-x]}\n"
                    "prices:\n  m-x: {per_call: 0.2}\n")
    monkeypatch.setenv("GATEWAY_CHANNELS_FILE", str(path))
    monkeypatch.setenv("UP_KEY", "from-env")
    reload_settings()
    try:
        catalog = channels.get_catalog(operator_prices=False)  # the document alone (no store here)
        assert catalog.channels[0].api_key == "from-env" and "m-x" in catalog.prices
    finally:
        monkeypatch.delenv("GATEWAY_CHANNELS_FILE")
        reload_settings()


def test_serving_names_an_unserved_model_before_asking_for_its_price():
    # Given a document whose channels serve m-small (priced) and m-large (not priced)
    catalog = Catalog.from_document(DOC)
    # When a billed request asks for a model no channel serves, it is a 404 naming the model
    with pytest.raises(NotFound, match="nowhere"):
        catalog.serving("nowhere", ["chat", "messages"])
    # And a served model with a price answers that price and the channels to try, in order
    price, tried = catalog.serving("m-small", ["chat", "messages"], prefer="chat")
    assert price.input_per_million is not None and [c.name for c in tried][-1] == "fallback"


def test_a_channel_variant_is_imgtask_only_and_basic_or_extended():
    base = {"name": "mj", "protocol": "imgtask", "base_url": "https://mj.example", "api_key": "k", "models": ["*"]}
    assert Catalog.from_document({"channels": [{**base, "variant": "basic"}]}).channels[0].variant == "basic"
    assert Catalog.from_document({"channels": [base]}).channels[0].variant is None
    with pytest.raises(ChannelsConfigError, match="variant"):
        Catalog.from_document({"channels": [{**base, "variant": "open"}]})
    with pytest.raises(ChannelsConfigError, match="variant"):
        Catalog.from_document({"channels": [{**base, "protocol": "beta", "variant": "basic"}]})
