"""The routes SDK users reach for first, with the official openai, anthropic and google-genai
SDKs against the local gateway (what `make run` starts): every model listed, one model found,
anthropic count_tokens, the openai video list, JSON output and stop sequences through a channel
of another dialect, /health, and the admin command line finding the gateway by itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import anthropic
import openai
import pytest
from google import genai
from google.genai import types as genai_types

from tests.e2e.conftest import DEMO_KEY, ROOT, LocalGateway, free_port, usage_cents

pytestmark = pytest.mark.e2e


@pytest.fixture
def an(gateway_url):
    with anthropic.Anthropic(api_key=DEMO_KEY, base_url=gateway_url, max_retries=0, timeout=60) as sdk:
        yield sdk


@pytest.fixture
def gg(gateway_url):
    return genai.Client(api_key=DEMO_KEY, http_options=genai_types.HttpOptions(
        base_url=gateway_url, api_version="v1beta", timeout=60_000))


def test_openai_lists_and_retrieves_image_and_video_models(openai_client):
    models = {m.id: m for m in openai_client.models.list()}
    assert models["iota-image-1"].owned_by == "iota" and models["epsilon-2"].owned_by == "epsilon"
    assert openai_client.models.retrieve("theta-3").owned_by == "theta"
    with pytest.raises(openai.NotFoundError):
        openai_client.models.retrieve("no-such-model")


def test_anthropic_lists_every_page_of_models_and_retrieves_one(an):
    names = [m.id for m in an.models.list(limit=5)]  # the SDK follows has_more / last_id
    assert {"iota-image-1", "epsilon-2", "m-small"} <= set(names) and len(names) == len(set(names))
    assert an.models.retrieve("m-large").type == "model"


def test_google_genai_lists_and_gets_models(gg):
    names = [m.name for m in gg.models.list(config={"page_size": 4})]
    assert {"models/iota-image-1", "models/zeta-video-1-0-pro-250528", "models/m-small"} <= set(names)
    assert gg.models.get(model="m-small").name == "models/m-small"


def test_anthropic_count_tokens_is_free(an, http):
    before = usage_cents(http)
    counted = an.messages.count_tokens(model="m-small", messages=[{"role": "user", "content": "Hello there"}])
    assert counted.input_tokens > 0
    raw = an.messages.with_raw_response.count_tokens(model="m-small", messages=[{"role": "user", "content": "Hi"}])
    assert raw.headers["x-gateway-token-count"] == "upstream"  # a messages channel counted it
    assert usage_cents(http) == before


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the SDK's notice about the upstream it was made for
def test_openai_lists_the_callers_videos_newest_first(openai_client):
    made = [openai_client.videos.create(prompt=f"boat {i}", model="epsilon-2", seconds="4") for i in range(3)]
    newest = sorted(made, key=lambda v: (v.created_at, v.id), reverse=True)
    first = openai_client.videos.list(limit=2)
    assert [v.id for v in first.data] == [v.id for v in newest[:2]] and first.has_more
    listed = [v.id for v in openai_client.videos.list(limit=2)]  # iterating follows the pages
    assert listed[:3] == [v.id for v in newest]


def test_health_answers_without_a_key(http):
    answer = http.get("/health")
    assert answer.status_code == 200 and answer.json() == {"status": "ok"}


def test_make_admin_finds_the_running_gateway_with_no_setup(gateway, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ACCOUNTS_", "TASKS_"))}
    env["GATEWAY_LOCAL_ENDPOINT_FILE"] = str(gateway.endpoint_file)
    done = subprocess.run(["make", "-s", "admin", "ARGS=create-user --username ann"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    made = json.loads(done.stdout)
    listed = subprocess.run([sys.executable, "-m", "gateway.admin", "list-users"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    assert made["user_id"] in [u["id"] for u in json.loads(listed.stdout)["users"]]


# ---- a gateway whose channels speak another dialect than the client ----

@pytest.fixture(scope="module")
def crossed(tmp_path_factory):
    """m-small only through a messages channel, m-large only through a chat channel."""
    simulator_port = free_port()
    base = f"http://127.0.0.1:{simulator_port}"
    path = tmp_path_factory.mktemp("channels") / "channels.yaml"
    path.write_text(json.dumps({"channels": [
        {"name": "messages-only", "protocol": "messages", "base_url": f"{base}/messages", "api_key": "s",
         "models": ["m-small"]},
        {"name": "chat-only", "protocol": "chat", "base_url": f"{base}/chat", "api_key": "s", "models": ["m-large"]},
    ]}))
    server = LocalGateway({"GATEWAY_CHANNELS_FILE": str(path), "GATEWAY_SIMULATOR_PORT": str(simulator_port)})
    yield server
    server.release()


def test_a_json_schema_request_to_a_messages_channel_comes_back_as_valid_json(crossed):
    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    with openai.OpenAI(api_key=DEMO_KEY, base_url=f"{crossed.url}/v1", max_retries=0) as sdk:
        answer = sdk.chat.completions.create(
            model="m-small", messages=[{"role": "user", "content": "Hello there"}],
            response_format={"type": "json_schema", "json_schema": {"name": "echo", "schema": schema}})
        assert json.loads(answer.choices[0].message.content) == {"text": "Hello there"}
        with pytest.raises(openai.BadRequestError) as caught:
            sdk.chat.completions.create(
                model="m-small", messages=[{"role": "user", "content": "hi"}], response_format={"type": "json_object"},
                tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])
        assert caught.value.body["param"] == "response_format"


def test_an_anthropic_stop_sequence_through_a_chat_channel_is_reported(crossed):
    with anthropic.Anthropic(api_key=DEMO_KEY, base_url=crossed.url, max_retries=0) as sdk:
        answer = sdk.messages.create(model="m-large", max_tokens=100, stop_sequences=["there"],
                                     messages=[{"role": "user", "content": "Hello there friend"}])
        assert (answer.stop_reason, answer.stop_sequence) == ("stop_sequence", "there")
        with sdk.messages.stream(model="m-large", max_tokens=100, stop_sequences=["friend"],
                                 messages=[{"role": "user", "content": "Hello there friend"}]) as stream:
            final = stream.get_final_message()
        assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", "friend")
        assert final.content[0].text == "You said: Hello there "
