import pytest

from gateway.settings import SettingsError, reload_settings


def test_settings_come_from_the_environment_typed(monkeypatch):
    monkeypatch.setenv("ACCOUNTS_TABLE", "acc")
    monkeypatch.setenv("GATEWAY_KEY_CACHE_SECONDS", "2.5")
    monkeypatch.setenv("GATEWAY_LEDGER_RETENTION_DAYS", "30")
    settings = reload_settings()
    assert (settings.accounts_table, settings.key_cache_seconds, settings.ledger_retention_days) == ("acc", 2.5, 30)


@pytest.mark.parametrize("name,value", [("GATEWAY_KEY_CACHE_SECONDS", "soon"), ("GATEWAY_LEDGER_RETENTION_DAYS", "-1")])
def test_a_wrong_setting_fails_loudly_by_name(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError, match=name):
        reload_settings()


@pytest.fixture(autouse=True)
def _restore():
    yield
    reload_settings()
