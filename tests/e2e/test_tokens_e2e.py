"""Self-service keys under `make run`: a key made with POST /api/token/ serves the official SDK,
and a deleted one is refused within the key cache's 5 s."""

import time

import openai
import pytest

from tests.e2e.conftest import DEMO_ACCESS_TOKEN

ACCESS = {"Authorization": DEMO_ACCESS_TOKEN, "X-Api-User": "1"}


def test_a_key_made_by_its_user_works_and_stops_working_after_delete(http, gateway_url):
    created = http.post("/api/token/", headers=ACCESS, json={"name": "e2e self-service", "expired_time": -1,
                                                              "remain_quota": 500_000, "unlimited_quota": False})
    assert created.status_code == 200, created.text
    token = created.json()["data"]
    with openai.OpenAI(api_key=token["key"], base_url=f"{gateway_url}/v1", max_retries=0, timeout=30) as sdk:
        answer = sdk.chat.completions.create(model="m-small", messages=[{"role": "user", "content": "hi"}])
        assert answer.choices[0].message.content
        listed = http.get("/api/token/", headers=ACCESS, params={"p": 0, "size": 100}).json()["data"]["items"]
        mine = next(t for t in listed if t["id"] == token["id"])
        assert 0 < mine["used_quota"] and mine["remain_quota"] == 500_000 - mine["used_quota"]
        deleted = http.delete(f"/api/token/{token['id']}", headers=ACCESS)
        assert deleted.json() == {"success": True, "message": ""}
        deadline = time.monotonic() + 5.5  # GATEWAY_KEY_CACHE_SECONDS
        while True:
            try:
                sdk.models.list()
            except openai.AuthenticationError:
                break
            assert time.monotonic() < deadline, "a deleted key was still served after the key cache's 5 s"
            time.sleep(0.25)
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(api_key=token["key"], base_url=f"{gateway_url}/v1", max_retries=0).models.list()
