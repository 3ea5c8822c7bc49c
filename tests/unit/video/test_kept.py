"""`tasks/kept.fetch`: where the channel's key goes when the gateway copies a result, and which
addresses it reads at all (an upstream names them; the gateway's own network is off limits)."""

from __future__ import annotations

import httpx
import pytest

from gateway.routing.channel import Channel
from gateway.tasks import kept
from gateway.upstreams.errors import UpstreamError

CHANNEL = Channel(name="veo", protocol="delta", base_url="https://generativelanguage.googleapis.com",
                  api_key="AIza-secret", models=frozenset({"*"}))
KEY = {"x-goog-api-key": CHANNEL.api_key}


class Recorder:
    """Answers each request from `answers` (status, headers) in turn and keeps what was sent."""

    def __init__(self, *answers: tuple[int, dict[str, str]]):
        self.answers, self.sent = list(answers), []

    def send(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        status, headers = self.answers.pop(0)
        return httpx.Response(status, headers=headers, content=b"video", request=request)


@pytest.fixture
def no_private(monkeypatch):
    from gateway.settings import reload_settings

    monkeypatch.setenv("GATEWAY_CALLBACK_ALLOW_PRIVATE", "0")
    reload_settings()
    yield
    monkeypatch.undo()
    reload_settings()


def test_the_key_goes_to_the_channels_host_and_is_dropped_when_it_redirects_elsewhere(no_private):
    # The Files API download answers a redirect to storage on another host (a public address here)
    http = Recorder((302, {"location": "https://93.184.216.34/stored/video.mp4?sig=abc"}), (200, {}))
    answer = kept.fetch(http, f"{CHANNEL.base_url}/v1beta/files/a1:download?alt=media", CHANNEL, KEY)
    assert answer is not None and answer.content == b"video"
    assert http.sent[0].headers["x-goog-api-key"] == CHANNEL.api_key
    assert "x-goog-api-key" not in http.sent[1].headers and http.sent[1].url.host == "93.184.216.34"


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "https://10.0.0.7/v.mp4",
                                 "http://127.0.0.1:8080/v.mp4", "ftp://93.184.216.34/v.mp4"])
def test_an_address_nobody_vouched_for_that_is_not_public_is_never_read(no_private, url):
    http = Recorder()
    with pytest.raises(UpstreamError) as refused:
        kept.fetch(http, url, CHANNEL, KEY)
    assert not refused.value.retryable and http.sent == []


def test_a_result_the_upstream_no_longer_serves_is_none_and_a_failure_is_retried_later(no_private):
    url = f"{CHANNEL.base_url}/v1beta/files/a1:download?alt=media"
    assert kept.fetch(Recorder((404, {})), url, CHANNEL, KEY) is None
    with pytest.raises(UpstreamError) as failed:
        kept.fetch(Recorder((503, {})), url, CHANNEL, KEY)
    assert failed.value.retryable
