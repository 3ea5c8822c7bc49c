"""Where the channels document and channel keys live when deployed: an SSM parameter (SecureString)
or a Secrets Manager secret, keys by `api_key_env` from a keys secret; every function that routes
reads them at cold start, and a source it cannot read fails that start naming it."""

import json

import pytest

from gateway.routing.channel import ChannelsConfigError
from gateway.routing.channels import get_catalog
from gateway.store.aws import client
from tests.conftest import load_function, use_environment

ROUTING_FUNCTIONS = [
    "text", "images", "video", "alpha", "beta", "gamma", "imgtask", "task_poller", "task_sweeper", "account", "batches"]
DOCUMENT = {"channels": [{"name": "main-chat", "protocol": "chat", "base_url": "https://upstream.example",
                          "api_key_env": "MAIN_CHAT_KEY", "models": ["m-small"]}]}
NO_SOURCE = {"GATEWAY_CHANNELS_FILE": None, "GATEWAY_SIMULATOR_URL": None, "GATEWAY_CHANNELS_PARAMETER": None,
             "GATEWAY_CHANNELS_SECRET": None, "GATEWAY_CHANNEL_KEYS_SECRET": None, "MAIN_CHAT_KEY": None}


@pytest.fixture
def keys_secret(store):
    return client("secretsmanager").create_secret(
        Name="gateway-channel-keys", SecretString=json.dumps({"MAIN_CHAT_KEY": "sk-from-the-secret"}))["ARN"]


def started(function: str, **environment: str | None):
    """The function loaded (its cold start) with `environment`; the catalog it read."""
    saved = use_environment(**{**NO_SOURCE, **environment})
    try:
        load_function(function)
        return get_catalog()
    finally:
        use_environment(**saved)


@pytest.mark.parametrize("function", ROUTING_FUNCTIONS)
def test_a_function_starts_with_channels_from_a_securestring_and_keys_from_a_secret(function, keys_secret):
    # Given the document in a SecureString parameter, naming its key by api_key_env, the key in a secret
    client("ssm").put_parameter(Name="/gateway/channels", Type="SecureString", Value=json.dumps(DOCUMENT),
                                Overwrite=True)
    # When the function starts
    catalog = started(function, GATEWAY_CHANNELS_PARAMETER="/gateway/channels",
                      GATEWAY_CHANNEL_KEYS_SECRET=keys_secret)
    # Then the channel has the key from the secret (never from the template or an environment variable)
    (channel,) = catalog.channels
    assert channel.name == "main-chat" and channel.api_key == "sk-from-the-secret"


@pytest.mark.parametrize("function", ROUTING_FUNCTIONS)
def test_a_function_starts_with_channels_from_a_secret(function, keys_secret):
    arn = client("secretsmanager").create_secret(Name=f"gateway-channels-{function}",
                                                 SecretString=json.dumps(DOCUMENT))["ARN"]
    catalog = started(function, GATEWAY_CHANNELS_SECRET=arn, GATEWAY_CHANNEL_KEYS_SECRET=keys_secret)
    assert [c.api_key for c in catalog.channels] == ["sk-from-the-secret"]


def test_a_missing_parameter_fails_the_cold_start_naming_it(store):
    with pytest.raises(ChannelsConfigError, match="parameter /gateway/nothing-here cannot be read: ParameterNotFound"):
        started("text", GATEWAY_CHANNELS_PARAMETER="/gateway/nothing-here")


def test_a_key_in_neither_the_environment_nor_the_secret_fails_the_start_naming_both(keys_secret):
    document = {"channels": [{**DOCUMENT["channels"][0], "api_key_env": "OTHER_KEY"}]}
    client("ssm").put_parameter(Name="/gateway/channels", Type="SecureString", Value=json.dumps(document),
                                Overwrite=True)
    with pytest.raises(ChannelsConfigError, match="OTHER_KEY is not set in the environment nor in secret"):
        started("images", GATEWAY_CHANNELS_PARAMETER="/gateway/channels", GATEWAY_CHANNEL_KEYS_SECRET=keys_secret)


def test_a_keys_secret_that_is_not_a_json_object_of_strings_is_refused(store):
    arn = client("secretsmanager").create_secret(Name="bad-keys", SecretString='["sk-1"]')["ARN"]
    client("ssm").put_parameter(Name="/gateway/channels", Type="String", Value=json.dumps(DOCUMENT), Overwrite=True)
    with pytest.raises(ChannelsConfigError, match="must be a JSON object of names to keys"):
        started("images", GATEWAY_CHANNELS_PARAMETER="/gateway/channels", GATEWAY_CHANNEL_KEYS_SECRET=arn)


def _secret_calls() -> list[str]:
    """The Secrets Manager operations the layer's client makes from now on."""
    calls: list[str] = []
    client("secretsmanager").meta.events.register(
        "before-call.secrets-manager", lambda model, **_: calls.append(model.name))
    return calls


def test_a_refresh_reads_every_secret_it_needs_in_one_call(keys_secret):
    arn = client("secretsmanager").create_secret(Name="gateway-channels-batch",
                                                 SecretString=json.dumps(DOCUMENT))["ARN"]
    calls = _secret_calls()
    catalog = started("text", GATEWAY_CHANNELS_SECRET=arn, GATEWAY_CHANNEL_KEYS_SECRET=keys_secret)
    assert [c.api_key for c in catalog.channels] == ["sk-from-the-secret"]
    # the document's secret and the keys' secret: one BatchGetSecretValue, not one GetSecretValue each
    assert calls == ["BatchGetSecretValue"]


def test_a_function_that_needs_no_keys_never_reads_the_keys_secret(keys_secret):
    client("ssm").put_parameter(Name="/gateway/channels", Type="String", Value=json.dumps(DOCUMENT), Overwrite=True)
    calls = _secret_calls()
    catalog = started("account", GATEWAY_CHANNELS_PARAMETER="/gateway/channels",
                      GATEWAY_CHANNEL_KEYS_SECRET=keys_secret, GATEWAY_CHANNEL_KEYS_NEEDED="false")
    assert [(c.name, c.api_key) for c in catalog.channels] == [("main-chat", "")]
    assert calls == []


def test_while_one_thread_rereads_the_document_the_others_go_on_with_the_one_in_force(keys_secret):
    from gateway.routing import document

    client("ssm").put_parameter(Name="/gateway/channels", Type="String", Value=json.dumps(DOCUMENT), Overwrite=True)
    saved = use_environment(**{**NO_SOURCE, "GATEWAY_CHANNELS_PARAMETER": "/gateway/channels",
                               "GATEWAY_CHANNEL_KEYS_SECRET": keys_secret})
    try:
        first = get_catalog()
        document._cached = (0.0, first)  # due for a re-read
        with document._lock:  # another thread is re-reading it
            assert get_catalog() is first
        # a re-read that fails (the parameter is gone) keeps the catalog in force
        client("ssm").delete_parameter(Name="/gateway/channels")
        assert get_catalog() is first
        assert document._cached[0] > 0.0  # and waits the minute before trying again
    finally:
        use_environment(**saved)
