"""The user's own tasks (GET /api/task/self, the console's Tasks page) through the account
function in-process: real beta tasks submitted, polled and settled against the simulator, and
stored tasks of another user and of many seconds for ownership, filters and paging."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest

from gateway.store.tasks import Task, TasksRepository
from tests.conftest import api_event
from tests.integration.test_beta import BODY, UNITS, fetch_sample, submit

PATH = "/api/task/self"


def own_tasks(account_fn, ctx, demo, query=None, *, user="1", token=None):
    headers = {"Authorization": token or demo["access_token"], "X-Api-User": user}
    answer = account_fn.lambda_handler(api_event("GET", PATH, headers=headers, query=query), ctx)
    return answer["statusCode"], json.loads(answer["body"])


def stored_task(task_id: str, owner: str, created_at: int, *, family="zeta", status="succeeded",
                urls=("http://upstream.invalid/raw.mp4",)) -> None:
    TasksRepository().put(Task(
        task_id=task_id, owner_id=owner, family=family, model=f"{family}-video", channel="c",
        upstream_task_id="u-" + task_id, reservation={"units": 1000}, created_at=created_at,
        updated_at=created_at, status=status, result_urls=list(urls) if status == "succeeded" else [],
        progress=100 if status == "succeeded" else 40))


def test_a_beta_task_is_listed_with_its_status_and_a_signed_link_that_serves_the_image(
        tasks_env, functions, queues, demo, account_fn, lambda_context, clock):
    status, answer = submit(functions, lambda_context, BODY, demo["key"])
    assert status == 200
    task_id = answer["id"]
    _, page = own_tasks(account_fn, lambda_context, demo, {"family": "beta"})
    row = next(item for item in page["data"]["items"] if item["task_id"] == task_id)
    # While it runs: the unified status and beta's own word, the hold, nothing charged, no link
    assert row["family"] == "beta" and row["model"] == "beta-2-pro"
    assert row["status"] in ("submitted", "queued", "in_progress") and row["public_status"] == "Pending"
    assert row["units_held"] == UNITS and row["units_charged"] is None and row["result_links"] == []
    clock.advance()
    queues.polls(lambda_context)
    _, page = own_tasks(account_fn, lambda_context, demo, {"family": "beta", "status": "succeeded"})
    row = next(item for item in page["data"]["items"] if item["task_id"] == task_id)
    assert row["status"] == "succeeded" and row["public_status"] == "Ready" and row["progress"] == 100
    assert row["units_charged"] == UNITS and row["billing"] == "settled"
    # The link is the gateway's signed sample link (as GET /beta/v1/get_result mints it), never
    # the upstream's, and it serves the image with no key
    [link] = row["result_links"]
    assert urlsplit(link).path == f"/beta/v1/results/{task_id}/sample" and "signature=" in link
    assert tasks_env not in link
    served = fetch_sample(functions, lambda_context, link)
    assert served["statusCode"] == 200


def test_only_the_callers_tasks_newest_first_filtered_and_paged(tasks_env, demo, account_fn, lambda_context):
    base = 1_600_000_000  # before every task the other tests submit
    for n in range(5):
        stored_task(f"task_list_mine_{n}", "1", base + n, status="succeeded" if n % 2 == 0 else "failed")
    stored_task("task_list_theirs", "2", base + 10)
    window = {"start_timestamp": str(base), "end_timestamp": str(base + 100)}
    status, page = own_tasks(account_fn, lambda_context, demo, window)
    ids = [item["task_id"] for item in page["data"]["items"]]
    assert status == 200 and ids == [f"task_list_mine_{n}" for n in (4, 3, 2, 1, 0)]
    assert page["data"]["total"] == 5 and page["data"]["total_exact"] and not page["data"]["has_more"]
    # Another user's task never shows (a generic family's link is what its answer hands out)
    assert "task_list_theirs" not in ids
    assert page["data"]["items"][0]["result_links"] == ["http://upstream.invalid/raw.mp4"]
    assert page["data"]["items"][1]["result_links"] == [] and page["data"]["items"][1]["units_charged"] is None
    # Paging: two by two, has_more until the last page
    _, first = own_tasks(account_fn, lambda_context, demo, {**window, "page_size": "2"})
    _, last = own_tasks(account_fn, lambda_context, demo, {**window, "page_size": "2", "p": "3"})
    assert [i["task_id"] for i in first["data"]["items"]] == ["task_list_mine_4", "task_list_mine_3"]
    assert first["data"]["has_more"] and not last["data"]["has_more"]
    assert [i["task_id"] for i in last["data"]["items"]] == ["task_list_mine_0"]
    # Filters: status, time window, family
    _, failed = own_tasks(account_fn, lambda_context, demo, {**window, "status": "failed"})
    assert [i["task_id"] for i in failed["data"]["items"]] == ["task_list_mine_3", "task_list_mine_1"]
    _, narrow = own_tasks(account_fn, lambda_context, demo, {"start_timestamp": str(base + 1),
                                                             "end_timestamp": str(base + 2)})
    assert [i["task_id"] for i in narrow["data"]["items"]] == ["task_list_mine_2", "task_list_mine_1"]
    _, none = own_tasks(account_fn, lambda_context, demo, {**window, "family": "gamma"})
    assert none["data"]["items"] == [] and none["data"]["total"] == 0


@pytest.mark.parametrize("query, param", [
    ({"status": "done"}, "status"), ({"family": "nope"}, "family"), ({"p": "0"}, "p"),
    ({"page_size": "101"}, "page_size"), ({"start_timestamp": "x"}, "start_timestamp"),
    ({"start_timestamp": "10", "end_timestamp": "5"}, "start_timestamp"), ({"p": "1000"}, "p"),
])
def test_bad_parameters_are_a_400_naming_the_parameter(demo, account_fn, lambda_context, query, param):
    status, body = own_tasks(account_fn, lambda_context, demo, query)
    assert status == 400 and body["success"] is False and param in body["message"]


def test_the_route_needs_the_callers_own_access_token(demo, account_fn, lambda_context):
    assert own_tasks(account_fn, lambda_context, demo, user="2")[0] == 401
    assert own_tasks(account_fn, lambda_context, demo, token="not-a-token")[0] == 401
