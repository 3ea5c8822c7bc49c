"""The simulated delta, zeta and epsilon upstreams speak their wire protocols, envelopes included."""

import pytest

from gateway_local.simulators import delta, epsilon, zeta

from .conftest import SIM, asgi_client

DELTA_SUBMIT = "/delta/v1beta/models/delta-3.0-generate-001:predictLongRunning"
DELTA_BODY = {"instances": [{"prompt": "a fox"}], "parameters": {"durationSeconds": 8}}
ZETA_TASKS = "/zeta/api/v3/contents/generations/tasks"
ZETA_BODY = {"model": "zeta-video-1-0-pro-250528", "content": [{"type": "text", "text": "a cat"}]}
BEARER = {"Authorization": "Bearer sk-sim"}
GOOG = {"x-goog-api-key": "sk-sim"}


@pytest.mark.parametrize("method,path,body", [
    ("POST", DELTA_SUBMIT, DELTA_BODY), ("GET", "/delta/v1beta/models/m/operations/x", None),
])
def test_delta_without_a_key_is_401_in_its_envelope(sim, method, path, body):
    for headers in ({}, {"x-goog-api-key": " "}):
        answer = sim.request(method, path, json=body, headers=headers)
        assert answer.status_code == 401
        assert answer.json()["error"]["status"] == "UNAUTHENTICATED" and answer.json()["error"]["code"] == 401


def test_delta_takes_the_key_as_a_query_parameter_too(sim, clock):
    assert sim.post(DELTA_SUBMIT + "?key=sk-sim", json=DELTA_BODY).status_code == 200


@pytest.mark.parametrize("method,path,body", [
    ("POST", ZETA_TASKS, ZETA_BODY), ("GET", ZETA_TASKS + "/cgt-x", None),
    ("POST", "/epsilon/v1/videos", {"prompt": "p"}), ("GET", "/epsilon/v1/videos/video_x", None),
    ("GET", "/epsilon/v1/videos/video_x/content", None),
])
def test_bearer_protocols_without_a_key_are_401_in_their_envelope(sim, method, path, body):
    for headers in ({}, {"Authorization": "Bearer "}, {"Authorization": "Basic abc"}):
        answer = sim.request(method, path, json=body, headers=headers)
        assert answer.status_code == 401
        error = answer.json()["error"]
        assert error["message"] and "type" in error and "code" in error


def test_a_fault_prefix_fails_every_request_in_the_family_envelope(sim):
    answer = sim.post("/delta/fault/500" + DELTA_SUBMIT.removeprefix("/delta"), json=DELTA_BODY, headers=GOOG)
    assert answer.status_code == 500 and answer.json()["error"]["status"] == "INTERNAL"
    answer = sim.get("/zeta/fault/500/api/v3/contents/generations/tasks/cgt-1", headers=BEARER)
    assert answer.status_code == 500 and answer.json()["error"]["code"] == "InternalServiceError"
    answer = sim.post("/epsilon/fault/503/v1/videos", json={"prompt": "p"})
    assert answer.status_code == 503 and answer.json()["error"]["type"] == "server_error"


def test_the_delta_submit_answers_an_operation_name_and_rejects_the_nested_image(sim, clock):
    name = sim.post(DELTA_SUBMIT, json=DELTA_BODY, headers=GOOG).json()["name"]
    assert name.startswith("models/delta-3.0-generate-001/operations/")
    assert sim.get(f"/delta/v1beta/{name}", headers=GOOG).json() == {"name": name, "done": False}
    nested = {"instances": [{"prompt": "a", "image": {"inlineData": {"data": "x"}}}]}
    answer = sim.post(DELTA_SUBMIT, json=nested, headers=GOOG)
    assert answer.status_code == 400 and "image is empty" in answer.json()["error"]["message"]


def test_a_fresh_epsilon_video_matches_the_spec_rules(sim, clock):
    video = sim.post("/epsilon/v1/videos", json={"prompt": "p", "model": "epsilon-2", "seconds": "8"},
                     headers=BEARER).json()
    assert video["status"] == "queued" and video["progress"] == 0 and video["object"] == "video"
    assert video["completed_at"] is None and video["error"] is None and video["expires_at"] is None
    assert (video["seconds"], video["model"], video["remixed_from_video_id"]) == ("8", "epsilon-2", None)
    clock.advance(3)
    finished = sim.get(f"/epsilon/v1/videos/{video['id']}", headers=BEARER).json()
    assert finished["status"] == "completed" and finished["completed_at"] and finished["expires_at"]


def test_epsilon_checks_its_own_body(sim):
    assert sim.post("/epsilon/v1/videos", json={}, headers=BEARER).json()["error"]["param"] == "prompt"
    assert sim.post("/epsilon/v1/videos", json={"prompt": "p", "seconds": 8}, headers=BEARER).status_code == 400
    assert sim.get("/epsilon/v1/videos/video_nope", headers=BEARER).status_code == 404


def test_epsilon_unknown_variant_and_failed_video_content(sim, clock):
    video_id = sim.post("/epsilon/v1/videos", json={"prompt": "p #fault=fail"}, headers=BEARER).json()["id"]
    clock.advance(3)
    assert sim.get(f"/epsilon/v1/videos/{video_id}/content?variant=poster", headers=BEARER).status_code == 400
    answer = sim.get(f"/epsilon/v1/videos/{video_id}/content", headers=BEARER)
    assert answer.status_code == 409 and "failed" in answer.json()["error"]["message"]


def test_unknown_files_are_404(sim):
    assert sim.get("/delta/v1beta/files/nope-0:download?alt=media", headers={"x-goog-api-key": "k"}).status_code == 404
    assert sim.get("/zeta/files/cgt-nope.mp4").status_code == 404


def test_result_urls_follow_where_the_simulator_is_mounted(clock):
    # Served on its own (no mount), the links have no prefix.
    with asgi_client(zeta.app, "http://127.0.0.1:9000") as client:
        task_id = client.post("/api/v3/contents/generations/tasks", json=ZETA_BODY, headers=BEARER).json()["id"]
        clock.advance(3)
        url = client.get(f"/api/v3/contents/generations/tasks/{task_id}", headers=BEARER).json()["content"]["video_url"]
    assert url == f"http://127.0.0.1:9000/files/{task_id}.mp4"


def test_task_time_comes_from_the_environment(sim, clock, monkeypatch):
    # Given a task time of 7 s from the environment, on the simulators' (fake) clock
    monkeypatch.setenv("GATEWAY_SIM_TASK_SECONDS", "7")
    name = sim.post(DELTA_SUBMIT, json=DELTA_BODY, headers=GOOG).json()["name"]
    # Then the task is running just before that time and done once it has passed
    clock.advance(6.9)
    assert sim.get(f"/delta/v1beta/{name}", headers=GOOG).json()["done"] is False
    clock.advance(0.2)
    assert sim.get(f"/delta/v1beta/{name}", headers=GOOG).json()["done"] is True


def test_the_default_task_time_is_three_seconds(monkeypatch):
    monkeypatch.delenv("GATEWAY_SIM_TASK_SECONDS", raising=False)
    assert delta.task_seconds() == zeta.task_seconds() == epsilon.task_seconds() == 3.0


def test_each_simulator_is_an_asgi_app_named_app():
    for module in (delta, zeta, epsilon):
        assert callable(module.app)
    assert SIM.startswith("http://")
