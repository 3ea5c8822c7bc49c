"""The environment, parsed once into a typed object, so a wrong setting fails loudly by name."""

from __future__ import annotations

import os
from functools import lru_cache

from pydantic import BaseModel, Field, ValidationError


class Settings(BaseModel):
    accounts_table: str = Field("gateway-accounts", alias="ACCOUNTS_TABLE")
    tasks_table: str = Field("gateway-tasks", alias="TASKS_TABLE")
    plants_table: str = Field("gateway-plants", alias="PLANTS_TABLE")
    idempotency_table: str = Field("gateway-idempotency", alias="IDEMPOTENCY_TABLE")
    task_poll_queue_url: str = Field("", alias="TASK_POLL_QUEUE_URL")
    callback_queue_url: str = Field("", alias="CALLBACK_QUEUE_URL")

    # Where the channels document comes from: a local file, an SSM parameter or a secret.
    channels_file: str = Field("", alias="GATEWAY_CHANNELS_FILE")
    channels_parameter: str = Field("", alias="GATEWAY_CHANNELS_PARAMETER")
    channels_secret: str = Field("", alias="GATEWAY_CHANNELS_SECRET")
    # Set by the local runner: base URL of the built-in simulated upstreams, used when no
    # channels document is configured.
    simulator_url: str = Field("", alias="GATEWAY_SIMULATOR_URL")
    # Public base URL of this gateway, for links it hands out (image URLs, task results).
    public_url: str = Field("", alias="GATEWAY_PUBLIC_URL")

    key_cache_seconds: float = Field(5.0, ge=0, alias="GATEWAY_KEY_CACHE_SECONDS")
    ledger_retention_days: int = Field(0, ge=0, alias="GATEWAY_LEDGER_RETENTION_DAYS")
    # Secret for signing callback payloads (HMAC-SHA256); empty disables the header.
    callback_signing_secret: str = Field("", alias="GATEWAY_CALLBACK_SECRET")

    model_config = {"populate_by_name": True, "extra": "ignore"}


class SettingsError(RuntimeError):
    pass


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    try:
        return Settings.model_validate(dict(os.environ))
    except ValidationError as exc:  # pragma: no cover - exercised by misconfiguration only
        names = ", ".join(str(err["loc"][0]) for err in exc.errors())
        raise SettingsError(f"invalid environment setting(s): {names}: {exc}") from exc


def reload_settings() -> Settings:
    """Forget the parsed environment (tests and the local runner change it)."""
    get_settings.cache_clear()
    return get_settings()
