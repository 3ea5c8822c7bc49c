"""The environment, parsed once into a typed object, so a wrong setting fails loudly by name.

A plain dataclass rather than a pydantic model: every function reads its settings at start, and
some (account, plants) would otherwise import pydantic for nothing but this.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any


@dataclass(frozen=True)
class Settings:
    accounts_table: str = "gateway-accounts"
    tasks_table: str = "gateway-tasks"
    # Where results the gateway keeps (beta images) live; unset: nothing is kept, only relayed.
    results_bucket: str = ""
    files_bucket: str = ""  # the Files API's bytes (store/files)
    plants_table: str = "gateway-plants"
    task_poll_queue_url: str = ""
    callback_queue_url: str = ""
    # Where the channels document comes from: a local file, an SSM parameter or a secret.
    channels_file: str = ""
    channels_parameter: str = ""
    channels_secret: str = ""
    # A secret whose JSON object gives the channels' `api_key_env` names their keys.
    channel_keys_secret: str = ""
    # The channels operators add through /api/channel/ (`routing/channel_store.py`): each key in
    # a secret of this name + the channel id; each instance reads the channels again this often.
    channel_key_prefix: str = "unified-ai-gateway/channel-keys/"
    channels_refresh_seconds: float = 10.0
    # False where the channels are read only for their names and models (the account function, the
    # admin command line): no key is looked up, and the role need not read the keys secret.
    channel_keys_needed: bool = True
    # Set by the local runner: base URL of the built-in simulated upstreams, used when no
    # channels document is configured.
    simulator_url: str = ""
    # Set by the local runner: the last characters of the demo key it printed. A key it does not
    # know is refused naming them beside the sent key's own (`auth.unknown_key_message`).
    demo_key_hint: str = ""
    # Public base URL of this gateway, for links it hands out (image URLs, task results).
    public_url: str = ""
    key_cache_seconds: float = 5.0
    ledger_retention_days: int = 0
    # Secret for signing callback payloads (HMAC-SHA256).
    callback_signing_secret: str = ""
    result_link_secret: str = ""  # signs the links to results the gateway serves (`tasks/links`)
    # Deployed: the Secrets Manager secrets holding those two (`signing_keys`), read at cold start.
    callback_secret_id: str = ""
    result_link_secret_id: str = ""
    # Callbacks to private, loopback and link-local addresses: only for tests and the local runner.
    callback_allow_private: bool = False
    callback_retry_seconds: float = 10.0  # first retry delay of a failed callback; doubles each time
    # Task engine: first poll delay (and backoff base), the backoff cap, how late a poll may be
    # before the sweeper re-enqueues it, and the age at which an unfinished task is failed.
    task_poll_seconds: float = 5.0
    task_poll_max_seconds: float = 60.0
    task_sweep_grace_seconds: float = 120.0
    task_max_age_seconds: float = 7200.0
    # Channel health (`routing/health.py`): this many failures within the window cool a channel
    # down for the cooldown (doubled by each failed probe, capped); instances cache the state.
    channel_failures: int = 3
    channel_failure_window_seconds: float = 60.0
    channel_cooldown_seconds: float = 30.0
    channel_cooldown_max_seconds: float = 600.0
    channel_health_cache_seconds: float = 5.0
    # A streamed answer whose upstream is silent this long gets a `: keep-alive` comment (idle
    # connections are cut by proxies and clients; a reasoning model may think for minutes).
    stream_keepalive_seconds: float = 10.0
    #: A non-streamed text answer still awaited this long is committed and kept alive with a space
    #: every as many seconds (0: never); below API Gateway's 5-minute idle timeout.
    buffered_keepalive_seconds: float = 30.0
    # A custom domain's base path mapping (e.g. /ai): stripped before a buffered function routes.
    base_path: str = ""
    # The limits a new key gets unless it is given its own (0: none; `limit_values.Limits.defaults`).
    default_key_rpm: int = 0
    default_key_max_parallel: int = 0
    default_key_budget_usd: float = 0.0
    default_key_budget_period: str = "daily"
    # Online top-up (`commerce.payments`): deployed, a Secrets Manager secret with both Stripe keys;
    # locally the keys themselves, and the API's base URL (the local runner's Stripe simulator).
    stripe_secret_id: str = ""
    stripe_api_key: str = ""
    stripe_webhook_secret: str = ""
    stripe_api_base: str = ""
    # Mail to people (`commerce.mail`): deployed, SES from this verified address; under `make run`,
    # files in this folder (the local outbox) instead.
    mail_from: str = ""
    mail_outbox: str = ""


# Setting -> environment variable.
ENVIRONMENT = {
    "accounts_table": "ACCOUNTS_TABLE", "tasks_table": "TASKS_TABLE", "plants_table": "PLANTS_TABLE",
    "results_bucket": "RESULTS_BUCKET",
    "files_bucket": "FILES_BUCKET",
    "task_poll_queue_url": "TASK_POLL_QUEUE_URL",
    "callback_queue_url": "CALLBACK_QUEUE_URL", "channels_file": "GATEWAY_CHANNELS_FILE",
    "channels_parameter": "GATEWAY_CHANNELS_PARAMETER", "channels_secret": "GATEWAY_CHANNELS_SECRET",
    "channel_keys_secret": "GATEWAY_CHANNEL_KEYS_SECRET", "channel_keys_needed": "GATEWAY_CHANNEL_KEYS_NEEDED",
    "channel_key_prefix": "GATEWAY_CHANNEL_KEY_PREFIX",
    "channels_refresh_seconds": "GATEWAY_CHANNELS_REFRESH_SECONDS",
    "simulator_url": "GATEWAY_SIMULATOR_URL", "demo_key_hint": "GATEWAY_DEMO_KEY_HINT",
    "public_url": "GATEWAY_PUBLIC_URL",
    "key_cache_seconds": "GATEWAY_KEY_CACHE_SECONDS", "ledger_retention_days": "GATEWAY_LEDGER_RETENTION_DAYS",
    "callback_signing_secret": "GATEWAY_CALLBACK_SECRET",
    "result_link_secret": "GATEWAY_RESULT_LINK_SECRET",
    "callback_secret_id": "GATEWAY_CALLBACK_SECRET_ID", "result_link_secret_id": "GATEWAY_RESULT_LINK_SECRET_ID",
    "callback_allow_private": "GATEWAY_CALLBACK_ALLOW_PRIVATE",
    "callback_retry_seconds": "GATEWAY_CALLBACK_RETRY_SECONDS",
    "task_poll_seconds": "GATEWAY_TASK_POLL_SECONDS", "task_poll_max_seconds": "GATEWAY_TASK_POLL_MAX_SECONDS",
    "task_sweep_grace_seconds": "GATEWAY_TASK_SWEEP_GRACE_SECONDS",
    "task_max_age_seconds": "GATEWAY_TASK_MAX_AGE_SECONDS",
    "channel_failures": "GATEWAY_CHANNEL_FAILURES",
    "channel_failure_window_seconds": "GATEWAY_CHANNEL_FAILURE_WINDOW_SECONDS",
    "channel_cooldown_seconds": "GATEWAY_CHANNEL_COOLDOWN_SECONDS",
    "channel_cooldown_max_seconds": "GATEWAY_CHANNEL_COOLDOWN_MAX_SECONDS",
    "channel_health_cache_seconds": "GATEWAY_CHANNEL_HEALTH_CACHE_SECONDS",
    "stream_keepalive_seconds": "GATEWAY_STREAM_KEEPALIVE_SECONDS",
    "buffered_keepalive_seconds": "GATEWAY_BUFFERED_KEEPALIVE_SECONDS", "base_path": "GATEWAY_BASE_PATH",
    "default_key_rpm": "GATEWAY_DEFAULT_KEY_RPM", "default_key_max_parallel": "GATEWAY_DEFAULT_KEY_MAX_PARALLEL",
    "default_key_budget_usd": "GATEWAY_DEFAULT_KEY_BUDGET_USD",
    "default_key_budget_period": "GATEWAY_DEFAULT_KEY_BUDGET_PERIOD",
    "stripe_secret_id": "GATEWAY_STRIPE_SECRET_ID", "stripe_api_key": "GATEWAY_STRIPE_API_KEY",
    "stripe_webhook_secret": "GATEWAY_STRIPE_WEBHOOK_SECRET", "stripe_api_base": "GATEWAY_STRIPE_API_BASE",
    "mail_from": "GATEWAY_MAIL_FROM", "mail_outbox": "GATEWAY_MAIL_OUTBOX",
}


class SettingsError(RuntimeError):
    pass


def _parse(name: str, kind: type, text: str) -> object:
    if kind is bool:  # bool("0") is True: read the usual words instead
        if text.strip().lower() not in ("1", "true", "yes", "0", "false", "no", ""):
            raise SettingsError(f"{ENVIRONMENT[name]}={text!r} is not true or false")
        return text.strip().lower() in ("1", "true", "yes")
    try:
        value = kind(text)
    except ValueError:
        raise SettingsError(f"{ENVIRONMENT[name]}={text!r} is not a valid {kind.__name__}") from None
    if isinstance(value, (int, float)) and value < 0:
        raise SettingsError(f"{ENVIRONMENT[name]} must not be negative")
    return value


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    values: dict[str, Any] = {}
    for spec in fields(Settings):
        text = os.environ.get(ENVIRONMENT[spec.name])
        if text is not None:
            values[spec.name] = _parse(spec.name, type(spec.default), text)
    return Settings(**values)


def reload_settings() -> Settings:
    """Forget the parsed environment (tests and the local runner change it)."""
    get_settings.cache_clear()
    return get_settings()
