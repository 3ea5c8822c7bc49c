"""The foundation over real HTTP: the local server, the plant store, the account endpoints."""

import pytest

from tests.e2e.conftest import DEMO_ACCESS_TOKEN, DEMO_KEY, DEMO_QUOTA, LocalGateway

pytestmark = pytest.mark.e2e
AUTH = {"Authorization": f"Bearer {DEMO_KEY}"}


def test_the_readme_plant_example(http):
    # curl -X POST localhost:3000/plants -H "Authorization: Bearer $KEY" -d '{"id":1,"name":"fern"}'
    answer = http.post("/plants", headers={**AUTH, "Content-Type": "application/x-www-form-urlencoded"},
                       content='{"id":1,"name":"fern"}')
    assert (answer.status_code, answer.json()) == (200, {"name": "fern"})
    bad = http.post("/plants", headers=AUTH, json={"id": "x", "name": "fern"})
    assert bad.status_code == 400 and bad.json()["error"] == 400 and "id" in bad.json()["message"]
    anonymous = http.post("/plants", json={"id": 2, "name": "fern"})
    assert anonymous.status_code == 401 and anonymous.json()["error"] == 401


def test_the_account_endpoints_answer_the_spec_fields(http):
    usage = http.get("/v1/dashboard/billing/usage", headers=AUTH, params={"start_date": "0"})
    assert usage.status_code == 200 and set(usage.json()) == {"object", "total_usage"}
    subscription = http.get("/v1/dashboard/billing/subscription", headers=AUTH).json()
    assert subscription["hard_limit_usd"] == 100000000 and subscription["access_until"] == 0
    me = http.get("/api/user/self", headers={"Authorization": DEMO_ACCESS_TOKEN, "X-Api-User": "1"})
    assert me.status_code == 200 and me.json()["success"] is True
    assert me.json()["data"]["id"] == 1 and me.json()["data"]["quota"] <= DEMO_QUOTA
    wrong_user = http.get("/api/user/self", headers={"Authorization": DEMO_ACCESS_TOKEN, "X-Api-User": "2"})
    assert wrong_user.status_code == 401


def test_an_unknown_route_is_refused_like_api_gateway(http):
    answer = http.get("/no/such/route", headers=AUTH)
    assert answer.status_code in (403, 404)


def test_the_server_stops_cleanly_on_ctrl_c():
    server = LocalGateway()
    assert server.stop() == 0
    assert "Traceback" not in "".join(server.output)
