"""Fuzzing from the committed OpenAPI document (docs/openapi.json) against the local gateway.

schemathesis generates requests for every operation, valid ones (positive) and ones that break
the document (negative), seeded and bounded so the run is the same every time and takes a
minute or two. Every answer must be below 500; every 4xx must come in its route family's
envelope; a refused request must leave the quota where it was.

The gateway runs on its own, with tasks that are never polled during the run, so no quota moves
except through the requests made here.
"""

from __future__ import annotations

import json
import os
import time

import httpx
import pytest

from gateway.errors import Dialect, dialect_for_path
from tests.e2e.conftest import DEMO_ACCESS_TOKEN, DEMO_KEY, LocalGateway, account

pytestmark = pytest.mark.e2e

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent.parent
# Examples per operation and generation mode (133 operations, both modes: about 1,300 requests,
# two minutes of the suite on 2 cores); FUZZ_EXAMPLES raises it for a longer local run.
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "5"))
# The routes the system access token opens (the console's JSON API); every other one takes the API key.
ACCESS_TOKEN_PATHS = ("/api/user", "/api/log/self", "/api/data", "/api/admin/", "/api/token", "/api/task/self",
                      "/api/pricing")


@pytest.fixture(scope="module")
def fuzz_gateway():
    server = LocalGateway({"GATEWAY_TASK_POLL_SECONDS": "86400", "GATEWAY_TASK_POLL_MAX_SECONDS": "86400",
                           "GATEWAY_SIM_TASK_SECONDS": "86400"})
    yield server
    server.release()


def test_the_local_runner_serves_its_openapi_document_and_swagger_ui(fuzz_gateway):
    with httpx.Client(base_url=fuzz_gateway.url, timeout=30) as http:
        document = http.get("/openapi.json")
        assert document.status_code == 200
        assert document.json() == json.loads((ROOT / "docs" / "openapi.json").read_text())
        assert http.get("/docs").status_code == 302  # to /docs/, whose asset links are relative
        page = http.get("/docs/")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert http.get("/docs/swagger-ui-bundle.js").status_code == 200


def envelope_problem(path: str, status: int, body: object) -> str | None:
    """What is wrong with a 4xx body for its route family, or None."""
    if not isinstance(body, dict):
        return "not a JSON object"
    dialect = dialect_for_path(path)
    if dialect is Dialect.MESSAGES:
        ok = body.get("type") == "error" and isinstance((body.get("error") or {}).get("message"), str)
    elif dialect is Dialect.CONTENT:
        error = body.get("error") or {}
        ok = (error.get("code") == status and isinstance(error.get("message"), str)
              and isinstance(error.get("status"), str))
    elif dialect is Dialect.PLANTS:
        ok = body.get("error") == status and isinstance(body.get("message"), str)
    elif dialect is Dialect.ACCOUNT:
        ok = body.get("data") is None and body.get("success") is False and isinstance(body.get("message"), str)
    elif dialect is Dialect.ALPHA:
        ok = isinstance(body.get("code"), int) and body["code"] != 0 and isinstance(body.get("message"), str) \
            and isinstance(body.get("request_id"), str)
    elif dialect is Dialect.BETA:
        ok = isinstance(body.get("detail"), str)
    elif dialect is Dialect.GAMMA:
        error = body.get("error") if isinstance(body.get("error"), dict) else {}
        ok = (isinstance(body.get("code"), str) and isinstance(body.get("message"), str)
              and isinstance(body.get("request_id"), str)) or (
            status == 401 and error.get("type") == "api_error" and isinstance(error.get("message"), str))
    elif dialect is Dialect.IMGTASK:
        ok = isinstance(body.get("code"), int) and isinstance(body.get("description"), str)
    else:
        error = body.get("error") if isinstance(body.get("error"), dict) else {}
        ok = isinstance(error.get("message"), str) and isinstance(error.get("type"), str)
    return None if ok else f"not the {dialect.value} envelope"


def test_fuzzing_every_operation_finds_no_5xx_no_foreign_envelope_and_no_quota_moved_by_a_refusal(fuzz_gateway):
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode

    document = json.loads((ROOT / "docs" / "openapi.json").read_text())
    schema = schemathesis.openapi.from_dict(document)
    url = fuzz_gateway.url
    problems: list[str] = []
    cases = 0
    tried: dict[tuple[str, str], int] = {}  # (operation, mode) -> requests made
    operations: set[str] = set()
    breakable: set[str] = set()  # operations with something a negative case can break
    started = time.monotonic()
    with httpx.Client(base_url=url, timeout=30) as http:
        quota = account(http)["quota"]

        def settled_quota(previous: int) -> int:
            # A served text answer settles right after its last byte: wait for the bill to land.
            for _ in range(20):
                now = account(http)["quota"]
                if now == previous or _ == 19:
                    return now
                previous = now
                time.sleep(0.02)
            return previous

        for result in schema.get_all_operations():
            operation = result.ok()
            path = operation.path
            name = f"{operation.method.upper()} {path}"
            operations.add(name)
            if any(len(list(part)) for part in (operation.path_parameters, operation.query, operation.headers,
                                                operation.body)):
                breakable.add(name)
            # The routes a user's system access token opens; every other one takes the API key.
            by_access_token = path.startswith(ACCESS_TOKEN_PATHS)
            auth = ({"Authorization": DEMO_ACCESS_TOKEN, "X-Api-User": "1"} if by_access_token
                    else {"Authorization": f"Bearer {DEMO_KEY}"})
            # An operation with nothing to break (no parameter, header or body: GET /api/status) has no
            # negative case at all: hypothesis would find its generation unsatisfiable.
            modes = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE) if name in breakable else (
                GenerationMode.POSITIVE,)
            for mode in modes:

                # Runs within this iteration (exchange() below), so the loop variables it reads are current.
                @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                          suppress_health_check=list(HealthCheck), phases=[Phase.explicit, Phase.generate])
                @given(case=operation.as_strategy(generation_mode=mode))
                def exchange(case) -> None:
                    nonlocal quota, cases
                    cases += 1
                    tried[(name, mode.value)] = tried.get((name, mode.value), 0) + 1  # noqa: B023
                    answer = case.call(base_url=url, headers={**(case.headers or {}), **auth}, timeout=60)  # noqa: B023
                    where = f"{case.method} {answer.request.url} ({mode.value}) -> {answer.status_code}"  # noqa: B023
                    if answer.status_code >= 500:
                        problems.append(f"{where}: {answer.text[:200]}")
                    elif answer.status_code >= 400:
                        try:
                            body = answer.json()
                        except ValueError:
                            body = None
                        if problem := envelope_problem(path, answer.status_code, body):  # noqa: B023
                            problems.append(f"{where}: {problem}: {answer.text[:200]}")
                        after = account(http)["quota"]
                        if after != quota:
                            problems.append(f"{where}: a refused request moved the quota by {after - quota}")
                        quota = after
                    else:
                        quota = settled_quota(quota)

                try:
                    exchange()
                except Unsatisfiable:
                    # An anonymous route with nothing to break (no parameter, header, body or
                    # credential, as GET /api/status): no invalid request of it exists.
                    anonymous = document["paths"][path][operation.method.lower()].get("security") == []
                    if mode is GenerationMode.POSITIVE or name in breakable or not anonymous:
                        raise
    elapsed = time.monotonic() - started
    print(f"fuzz: {cases} requests in {elapsed:.1f}s")
    # The floor: every operation was fuzzed with valid requests, and every one with anything to
    # break (parameters, headers or a body) with invalid ones too.
    untried = sorted([f"{name} (positive)" for name in operations if not tried.get((name, "positive"))] +
                     [f"{name} (negative)" for name in breakable if not tried.get((name, "negative"))])
    assert not untried, "never fuzzed: " + ", ".join(untried)
    assert not problems, "\n".join(problems[:30])
