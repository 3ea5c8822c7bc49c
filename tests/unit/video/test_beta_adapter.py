"""The beta adapter against its simulator and odd answers; the channel's polling-URL rule; signed links."""

import httpx
import pytest

from gateway.errors import PermissionDenied
from gateway.routing.catalog import Catalog
from gateway.routing.channel import Channel
from gateway.tasks import links
from gateway.tasks.adapter import UNIFIED, poll, send
from gateway.tasks.families.beta import PUBLIC_STATUS
from gateway.tasks.families.beta.adapter import BetaAdapter
from gateway.upstreams.errors import UpstreamError

from .conftest import SIM

KEY = "sk-upstream"
ADAPTER = BetaAdapter()
BASE = f"{SIM}/beta"
REQUEST = {"prompt": "a fox", "width": 1024, "height": 768, "output_format": "jpeg"}


def answer(status, body):
    return httpx.Response(status, json=body, request=httpx.Request("GET", "http://up.test/x"))


def channel(**overrides) -> Channel:
    values = dict(name="b", protocol="beta", base_url="https://api.beta.test", api_key=KEY,
                  models=frozenset({"*"}))
    return Channel(**{**values, **overrides})


def test_the_submit_carries_the_key_in_x_key_and_no_webhook():
    request = ADAPTER.build_submit("https://api.beta.test/", KEY, "beta-2-pro", REQUEST)
    assert str(request.url) == "https://api.beta.test/v1/beta-2-pro" and request.headers["x-key"] == KEY
    assert "authorization" not in request.headers


def test_a_beta_task_is_polled_at_the_upstreams_own_url_until_its_sample_serves(sim, clock):
    accepted = ADAPTER.parse_accepted(send(sim, ADAPTER.build_submit(BASE, KEY, "beta-2-pro", REQUEST),
                                           repeatable=False))
    assert accepted.poll_url and "/regional/v1/get_result?id=" in accepted.poll_url
    pending = ADAPTER.parse_poll(send(sim, ADAPTER.build_poll_url(accepted.poll_url, KEY), repeatable=True))
    assert (pending.status, pending.upstream_status, pending.progress) == ("in_progress", "Pending", 0)
    clock.advance(4)
    ready = poll(sim, ADAPTER, BASE, KEY, accepted.upstream_task_id)
    assert ready.status == "succeeded" and ready.progress == 100 and ready.details["result"]["prompt"] == "a fox"
    assert sim.get(ready.result_urls[0]).content[:2] == b"\xff\xd8"  # a JPEG
    clock.advance(601)
    assert sim.get(ready.result_urls[0]).status_code == 403  # the upstream's link expired


def test_the_simulator_wants_the_key_and_forgets_nothing_it_never_had(sim):
    assert sim.post(f"{BASE}/v1/beta-2-pro", json=REQUEST).status_code == 401
    lost = poll(sim, ADAPTER, BASE, KEY, "nope")
    assert (lost.status, lost.upstream_status) == ("failed", "Task not found")


def test_upstream_errors_carry_their_detail():
    with pytest.raises(UpstreamError) as caught:
        ADAPTER.parse_accepted(answer(422, {"detail": [{"loc": ["body", "width"], "msg": "too big"}]}))
    assert caught.value.status == 422 and caught.value.message == "width: too big"
    with pytest.raises(UpstreamError) as caught:
        ADAPTER.parse_accepted(answer(402, {"detail": "Insufficient credits"}))
    assert caught.value.message == "Insufficient credits"
    with pytest.raises(UpstreamError):
        ADAPTER.parse_accepted(answer(200, {"polling_url": "https://x"}))


def test_moderation_fails_with_its_word_and_an_unknown_word_keeps_running():
    moderated = ADAPTER.parse_poll(answer(200, {"id": "t", "status": "Content Moderated",
                                                "details": {"moderation_reasons": ["x"]}}))
    assert moderated.status == "failed" and moderated.error.startswith("Content Moderated")
    odd = ADAPTER.parse_poll(answer(200, {"id": "t", "status": "Throttled"}))
    assert (odd.status, odd.terminal) == ("in_progress", False)
    assert set(PUBLIC_STATUS) == set(UNIFIED)


@pytest.mark.parametrize("url,allowed", [
    ("https://api.beta.test/v1/get_result?id=1", True),  # the base URL's own host
    ("https://api.eu.beta.test/v1/get_result?id=1", True),  # listed
    ("https://x.regions.beta.test/v1/get_result?id=1", True),  # a listed wildcard
    ("https://regions.beta.test/v1/get_result?id=1", False),  # the wildcard is for subdomains only
    ("http://api.eu.beta.test/v1/get_result?id=1", False),  # never plain http for a host entry
    ("https://evil.test/v1/get_result?id=1", False),
    ("https://api.eu.beta.test.evil.test/x", False),
    ("https://user:pw@api.eu.beta.test/x", False),
    ("http://127.0.0.1:9001/beta/x", True),  # an explicit origin, scheme and port included
    ("http://127.0.0.1:9002/beta/x", False),
    ("https://127.0.0.1:9001/beta/x", False),
    ("not a url", False),
])
def test_a_polling_url_is_followed_only_to_a_host_the_channel_allows(url, allowed):
    strict = channel(poll_hosts=frozenset({"api.eu.beta.test", "*.regions.beta.test", "http://127.0.0.1:9001"}))
    assert strict.allows_poll_url(url) is allowed


@pytest.mark.parametrize("url,allowed", [
    ("http://relay.internal:8080/v1/get_result?id=1", True),  # the base URL's own origin, plain http as it is
    ("HTTP://Relay.Internal:8080/files/1", True),
    ("https://relay.internal/v1/get_result", True),  # its host over TLS
    ("http://relay.internal/v1/get_result", False),  # another port: another origin
    ("http://relay.internal:8081/x", False),
    ("http://other.internal:8080/x", False),
    ("http://user:pw@relay.internal:8080/x", False),
])
def test_a_plain_http_base_url_vouches_for_its_own_origin_only(url, allowed):
    # A relay on a private network: its key already goes to this origin with every request
    assert channel(base_url="http://relay.internal:8080/").allows_poll_url(url) is allowed


def test_an_origin_is_compared_with_its_default_port_left_out():
    assert channel(base_url="http://relay.internal").allows_poll_url("http://relay.internal:80/x")
    assert channel(base_url="https://api.beta.test:443/v1").allows_poll_url("https://api.beta.test/x")
    parsed = Catalog.from_document({"channels": [{"name": "b", "protocol": "beta", "base_url": "https://a.test",
                                                  "api_key": "k", "models": ["*"],
                                                  "poll_hosts": ["http://10.0.0.2:80"]}]}).channels[0]
    assert parsed.allows_poll_url("http://10.0.0.2/result") and not parsed.allows_poll_url("http://10.0.0.2:81/r")


def test_the_channels_document_reads_poll_hosts_and_refuses_bad_ones():
    document = {"channels": [{"name": "b", "protocol": "beta", "base_url": "https://api.beta.test", "api_key": "k",
                              "models": ["beta-2-pro"], "poll_hosts": ["API.EU.beta.test", "http://127.0.0.1:9"]}]}
    parsed = Catalog.from_document(document).channels[0]
    assert parsed.poll_hosts == frozenset({"api.eu.beta.test", "http://127.0.0.1:9"})
    for bad in (["https://x.test/path"], ["x.test/path"], ["a.*.test"], [""]):
        with pytest.raises(ValueError, match="poll_hosts"):
            Catalog.from_document({"channels": [{**document["channels"][0], "poll_hosts": bad}]})


def test_the_simulated_channels_allow_both_local_names_of_the_simulators_only():
    beta = next(c for c in Catalog.simulated("http://127.0.0.1:3001").channels if c.protocol == "beta")
    assert beta.allows_poll_url("http://localhost:3001/beta/regional/v1/get_result?id=1")
    assert beta.allows_poll_url("http://127.0.0.1:3001/beta/v1/get_result?id=1")
    assert not beta.allows_poll_url("http://localhost:3000/v1/anything")


def test_a_signed_link_serves_until_it_expires_and_only_for_its_own_path(monkeypatch):
    from gateway.settings import reload_settings

    monkeypatch.setenv("GATEWAY_RESULT_LINK_SECRET", "s3cret")
    reload_settings()
    link = links.sign("https://gw.test/v1", "/beta/v1/results/t1/sample", now=1000)
    query = dict(part.split("=") for part in link.split("?")[1].split("&"))
    links.verify("/beta/v1/results/t1/sample", query["expires"], query["signature"], now=1000 + 3599)
    with pytest.raises(PermissionDenied, match="expired"):
        links.verify("/beta/v1/results/t1/sample", query["expires"], query["signature"], now=1000 + 3601)
    with pytest.raises(PermissionDenied, match="signature"):
        links.verify("/beta/v1/results/t2/sample", query["expires"], query["signature"], now=1000)
    with pytest.raises(PermissionDenied):
        links.verify("/beta/v1/results/t1/sample", None, query["signature"], now=1000)
    monkeypatch.delenv("GATEWAY_RESULT_LINK_SECRET")
    reload_settings()


# --- BFL's own polling hosts, and the price by megapixels ------------------------------------

class Recorder:
    """A sender that records each request and answers a Pending result."""

    def __init__(self):
        self.urls: list[str] = []

    def send(self, request: httpx.Request) -> httpx.Response:
        self.urls.append(str(request.url))
        return httpx.Response(200, json={"id": "t", "status": "Pending", "result": None, "progress": 0.5},
                              request=request)


def bfl_task(poll_url):
    from gateway.store.tasks import Task

    return Task(task_id="task_1", owner_id="1", family="beta", model="beta-2-pro", channel="b",
                upstream_task_id="abc", reservation={"units": 45_000}, created_at=0, updated_at=0,
                poll_url=poll_url)


@pytest.mark.parametrize("host", ["api.bfl.ai", "api.eu.bfl.ai", "api.us.bfl.ai", "api.eu1.bfl.ai",
                                  "api.eu2.bfl.ai", "api.us1.bfl.ai"])
def test_a_bfl_channel_polls_the_regional_host_bfl_names_without_listing_it(host):
    # BFL names a regional polling host (`https://api.eu2.bfl.ai/v1/get_result?id=...`) and has
    # charged at submit: the task is polled there, not failed and refunded.
    from gateway.tasks.families.beta import FAMILY

    sender = Recorder()
    url = f"https://{host}/v1/get_result?id=abc"
    snapshot = FAMILY._ask(sender, channel(base_url="https://api.bfl.ai"), bfl_task(url))
    assert snapshot.status == "in_progress" and sender.urls == [url]


@pytest.mark.parametrize("url", [
    "https://evil.test/v1/get_result?id=abc", "https://api.eu2.bfl.ai.evil.test/v1/get_result?id=abc",
    "http://api.eu2.bfl.ai/v1/get_result?id=abc", "https://user@api.eu2.bfl.ai/v1/get_result?id=abc",
    "https://api.eu2.bfl.ai:8443/v1/get_result?id=abc", "https://x.bfl.ai/v1/get_result?id=abc",
    "https://apiXeu2.bfl.ai/v1/get_result?id=abc",
])
def test_any_other_polling_host_never_gets_the_key_and_the_task_is_asked_for_at_the_base_url(url):
    from gateway.tasks.families.beta import FAMILY

    sender = Recorder()
    FAMILY._ask(sender, channel(base_url="https://api.bfl.ai"), bfl_task(url))
    assert sender.urls == ["https://api.bfl.ai/v1/get_result?id=abc"]


def test_a_bfl_host_is_not_trusted_for_a_channel_whose_base_url_is_not_bfl():
    # A proxy's key is not sent to BFL's hosts because BFL's answer would name them.
    from gateway.tasks.families.beta import FAMILY

    sender = Recorder()
    FAMILY._ask(sender, channel(base_url="https://proxy.example"), bfl_task("https://api.eu2.bfl.ai/v1/get_result?id=abc"))
    assert sender.urls == ["https://proxy.example/v1/get_result?id=abc"]


@pytest.mark.parametrize("width,height,units", [
    (1024, 768, 15_000),   # 0.79 MP: one megapixel, 0.03 USD
    (1024, 1024, 22_500),  # 1.05 MP: two, 0.03 + 0.015 USD
    (2048, 2048, 45_000),  # 4.19 MP: five, 0.03 + 4 x 0.015 = 0.09 USD
])
def test_a_beta_image_is_held_at_bfl_s_price_for_its_megapixels(width, height, units):
    from gateway.prices import SHIPPED
    from gateway.tasks.families.beta import FAMILY

    task = FAMILY.create_task({"model": "beta-2-pro", "prompt": "p", "width": width, "height": height},
                              "https://gw.test")
    assert FAMILY.units_to_hold(task, SHIPPED["beta-2-pro"]) == units


def test_a_beta_image_settles_to_the_megapixels_bfl_reports_never_above_the_hold():
    from dataclasses import replace

    from gateway.prices import SHIPPED
    from gateway.tasks.families.beta import FAMILY

    task = bfl_task(None)
    price = SHIPPED["beta-2-pro"]
    assert FAMILY.units_to_settle(replace(task, details={"charged": {"output_mp": 1.05}}), price) == 22_500
    assert FAMILY.units_to_settle(replace(task, details={"charged": {"output_mp": 9.0}}), price) == 45_000
    assert FAMILY.units_to_settle(replace(task, details={}), price) == 45_000
