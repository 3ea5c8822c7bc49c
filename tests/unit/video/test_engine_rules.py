"""Pure rules of the task engine: poll backoff, the price of what was delivered, settings."""

import pytest

from gateway.settings import SettingsError, reload_settings
from gateway.store.tasks import Task
from gateway.tasks import engine


@pytest.fixture(autouse=True)
def _settings(monkeypatch):
    monkeypatch.setenv("GATEWAY_TASK_POLL_SECONDS", "4")
    monkeypatch.setenv("GATEWAY_TASK_POLL_MAX_SECONDS", "30")
    reload_settings()
    yield
    reload_settings()


def test_polls_back_off_by_half_each_time_up_to_the_cap():
    delays = [engine.poll_delay(n) for n in range(8)]
    assert delays[:3] == [4.0, 6.0, 9.0]
    assert delays == sorted(delays) and delays[-1] == 30.0


def _task(urls, samples, units, seconds, family="delta"):
    return Task(task_id="task_1", owner_id="1", family=family, model=f"{family}-3.0-generate-001"
                if family == "delta" else "epsilon-2", channel="c", upstream_task_id="u", created_at=0, updated_at=0,
                result_urls=urls, quantities={"seconds": seconds, "samples": samples}, reservation={"units": units})


def test_a_task_that_delivers_every_video_pays_its_reservation():
    assert engine.settled_units(_task(["a", "b"], 2, 3_200_000, 16)) == 3_200_000
    assert engine.settled_units(_task([], 1, 200_000, 4, "epsilon")) == 200_000  # epsilon: no links, one video


def test_fewer_videos_than_asked_cost_proportionally_less():
    # 2 of 4 videos of 8 s at 0.40 USD/s: 6.40 USD
    assert engine.settled_units(_task(["a", "b"], 4, 6_400_000, 32)) == 3_200_000


def test_the_callback_private_address_switch_reads_true_and_false_words(monkeypatch):
    for word, expected in (("1", True), ("true", True), ("0", False), ("false", False)):
        monkeypatch.setenv("GATEWAY_CALLBACK_ALLOW_PRIVATE", word)
        assert reload_settings().callback_allow_private is expected
    monkeypatch.setenv("GATEWAY_CALLBACK_ALLOW_PRIVATE", "maybe")
    with pytest.raises(SettingsError, match="GATEWAY_CALLBACK_ALLOW_PRIVATE"):
        reload_settings()
    monkeypatch.delenv("GATEWAY_CALLBACK_ALLOW_PRIVATE")


def test_the_docs_quote_the_zeta_command_rules_the_schema_enforces():
    from pathlib import Path

    from gateway.tasks.families.zeta.schema import ZETA_COMMAND_RULES_DOC

    families = (Path(__file__).resolve().parents[3] / "docs" / "families.md").read_text()
    assert ZETA_COMMAND_RULES_DOC.split("\n", 1)[1] in families
