"""The product under faults below it (`GATEWAY_LOCAL_FAULTS`): a seeded mix of requests of every
family through a local gateway, then the money counted where the gateway keeps it.

Shared by `make bench-faults` (bench/faults.py, a few thousand requests) and
tests/e2e/test_faults.py (a few hundred). What is counted:

- `server_errors`: an answer that is not a clean one: a 500, a refusal the request did not earn
  (every request of the mix is valid and the account has plenty of quota: only a "retry later",
  429 or 503, or an upstream's failure relayed, 502 or 504, is a clean failure), a body that is
  not its family's JSON, a stream cut before its end event, a connection dropped;
- `lost_units`: units that went missing or appeared: everything added to the account against
  its quota, its used quota and what its open holds and leases keep (nothing may be open at the
  end: a hold outlived its request), and the ledger's entries against the used quota;
- `double_charges`: a request id with more than one ledger entry, a settled request charged more
  than the tokens its answer reported were priced at, a failed request charged anything;
- `stuck_tasks`: a submitted task not finished, settled or refunded by the end.

The accounts and tasks tables are read over the emulator's HTTP endpoint, which no fault reaches
(faults apply to the calls of the runner's own processes only).
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import httpx

FAULTS = "dynamodb.throttle=0.05,dynamodb.error=0.02,dynamodb.lost_answer=0.02,sqs.duplicate=0.05"
TASK_SECONDS = 120  # how long a task may take to finish under faults (the simulators take 2 s)
# The clean failures in this workload (the account has plenty of quota, every body is valid, no
# id is reused): "retry later" (429, 503) or an upstream's failure relayed (502, 504: the local
# simulators answer every request, but a connection to them can still drop), in the family's
# envelope, its hold released (`_charges` checks that a failed request is charged nothing; the
# bench prints each status). Any other refusal (a 403 "quota too low", a 409 "id already used")
# is the gateway misreading a fault below it.
_CLEAN_FAILURES = {429, 502, 503, 504}


@dataclass
class Outcome:
    kind: str
    status: int | None  # None: no answer (the connection failed)
    request_id: str = ""
    clean: bool = True
    why: str = ""
    task_id: str = ""
    tokens: int | None = None  # what the answer reported (input + output), for text


@dataclass
class Counts:
    requests: int = 0
    server_errors: int = 0
    lost_units: int = 0
    double_charges: int = 0
    stuck_tasks: int = 0
    statuses: Counter = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    def line(self) -> str:
        return (f"bench-faults: requests={self.requests} server_errors={self.server_errors} "
                f"lost_units={self.lost_units} double_charges={self.double_charges} stuck_tasks={self.stuck_tasks}")


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _ended(kind: str, text: str) -> bool:
    """A stream that reached its dialect's end event."""
    if kind.startswith("chat"):
        return text.rstrip().endswith("data: [DONE]")
    if kind.startswith("messages"):
        return "event: message_stop" in text
    if kind.startswith("responses"):
        return "response.completed" in text or "response.incomplete" in text
    return '"finishReason"' in text  # content generation: the last chunk names its finish reason


def _usage_tokens(kind: str, body: Any) -> int | None:
    try:
        if kind.startswith("chat") or kind == "embeddings":
            usage = body["usage"]
            return int(usage.get("total_tokens") or usage["prompt_tokens"] + usage.get("completion_tokens", 0))
        if kind.startswith("messages"):
            return int(body["usage"]["input_tokens"]) + int(body["usage"]["output_tokens"])
        if kind.startswith("responses"):
            return int(body["usage"]["input_tokens"]) + int(body["usage"]["output_tokens"])
        if kind.startswith("content"):
            return int(body["usageMetadata"]["totalTokenCount"])
    except (KeyError, TypeError, ValueError):
        return None
    return None


_PROMPT = [{"role": "user", "content": "Say something short."}]
TEXT = {
    "chat": ("/v1/chat/completions", {"model": "m-small", "messages": _PROMPT}),
    "messages": ("/v1/messages", {"model": "m-small", "max_tokens": 64, "messages": _PROMPT}),
    "responses": ("/v1/responses", {"model": "m-small", "input": "Say something short."}),
    "content": ("/v1beta/models/m-small:generateContent",
                {"contents": [{"role": "user", "parts": [{"text": "Say something short."}]}]}),
}


class Driver:
    def __init__(self, url: str, key: str, seed: int):
        self.url, self.key, self.random = url, key, random.Random(seed)
        self.outcomes: list[Outcome] = []
        self._lock = threading.Lock()

    def plan(self, requests: int) -> list[str]:
        kinds = ([f"{name}{suffix}" for name in TEXT for suffix in ("", "+stream")] * 3
                 + ["embeddings"] * 2 + ["images"] + ["delta", "zeta", "imgtask"])
        return [self.random.choice(kinds) for _ in range(requests)]

    def run(self, requests: int, concurrency: int) -> list[Outcome]:
        plan = self.plan(requests)
        with httpx.Client(base_url=self.url, timeout=120) as client, \
                ThreadPoolExecutor(max_workers=concurrency) as pool:
            for outcome in pool.map(lambda kind: self._one(client, kind), plan):
                self.outcomes.append(outcome)
        return self.outcomes

    def _one(self, client: httpx.Client, kind: str) -> Outcome:
        try:
            if kind in ("delta", "zeta", "imgtask"):
                return self._task(client, kind)
            return self._sync(client, kind)
        except httpx.HTTPError as exc:
            return Outcome(kind, None, clean=False, why=f"{type(exc).__name__}: {exc}")

    def _sync(self, client: httpx.Client, kind: str) -> Outcome:
        headers = _auth(self.key)
        if kind == "embeddings":
            answer = client.post("/v1/embeddings", headers=headers, json={"model": "m-embed", "input": "a fox"})
        elif kind == "images":
            answer = client.post("/v1/images/generations", headers=headers,
                                 json={"model": "theta-3", "prompt": "a lighthouse", "response_format": "url"})
        else:
            name, stream = kind.split("+")[0], kind.endswith("+stream")
            path, body = TEXT[name]
            if name == "messages":
                headers = {"x-api-key": self.key, "anthropic-version": "2023-06-01"}
            if stream:
                if name == "content":
                    path = path.replace(":generateContent", ":streamGenerateContent") + "?alt=sse"
                else:
                    body = {**body, "stream": True}
                    if name == "chat":
                        body["stream_options"] = {"include_usage": True}
            with client.stream("POST", path, headers=headers, json=body) as streamed:
                text = streamed.read().decode()
                status, request_id = streamed.status_code, streamed.headers.get("x-request-id", "")
            if status != 200:
                return self._failure(kind, status, request_id, text)
            if stream:
                if not _ended(name, text):
                    return Outcome(kind, status, request_id, clean=False, why=f"stream cut: {text[-200:]!r}")
                return Outcome(kind, status, request_id, tokens=_stream_tokens(name, text))
            try:
                parsed = json.loads(text)
            except ValueError:
                return Outcome(kind, status, request_id, clean=False, why=f"not JSON: {text[:200]!r}")
            return Outcome(kind, status, request_id, tokens=_usage_tokens(name, parsed))
        request_id = answer.headers.get("x-request-id", "")
        if answer.status_code != 200:
            return self._failure(kind, answer.status_code, request_id, answer.text)
        try:
            parsed = answer.json()
        except ValueError:
            return Outcome(kind, 200, request_id, clean=False, why=f"not JSON: {answer.text[:200]!r}")
        return Outcome(kind, 200, request_id, tokens=_usage_tokens(kind, parsed))

    @staticmethod
    def _failure(kind: str, status: int, request_id: str, text: str) -> Outcome:
        try:
            json.loads(text)
            enveloped = True
        except ValueError:
            enveloped = False
        clean = status in _CLEAN_FAILURES and enveloped
        return Outcome(kind, status, request_id, clean=clean, why=f"{status}: {text[:300]}")

    def _task(self, client: httpx.Client, kind: str) -> Outcome:
        headers = _auth(self.key)
        if kind == "imgtask":
            answer = client.post("/imgtask/submit/imagine", headers=headers, json={"prompt": "a lighthouse"})
        elif kind == "delta":
            answer = client.post("/v1/video/generations", headers=headers, json={
                "model": "delta-3.1-fast-generate-001", "instances": [{"prompt": "a lighthouse #fault=fewer"}],
                "parameters": {"durationSeconds": 6, "generateAudio": False, "sampleCount": 2}})
        else:
            answer = client.post("/v1/video/generations", headers=headers, json={
                "model": "zeta-video-1-0-lite-t2v-250428", "content": [{"type": "text", "text": "a kite"}]})
        request_id = answer.headers.get("x-request-id", "")
        if answer.status_code != 200:
            return self._failure(kind, answer.status_code, request_id, answer.text)
        body = answer.json()
        if kind == "imgtask":
            if body.get("code") != 1:
                return self._failure(kind, 200 if body.get("code") in (3, 4, 21, 22, 23, 24) else 500,
                                     request_id, answer.text)
            task_id = str(body["result"])
        else:
            task_id = str(body.get("task_id") or body.get("taskId"))
        deadline = time.monotonic() + TASK_SECONDS
        while time.monotonic() < deadline:
            time.sleep(1)
            if kind == "imgtask":
                polled = client.get(f"/imgtask/task/{task_id}/fetch", headers=headers)
                done = polled.status_code == 200 and polled.json().get("status") in ("SUCCESS", "FAILURE", "CANCEL")
            else:
                polled = client.get("/v1/video/generations/result", params={"taskid": task_id}, headers=headers)
                done = polled.status_code == 200 and polled.json().get("task_status") in ("succeeded", "failed")
            if polled.status_code != 200 and polled.status_code not in _CLEAN_FAILURES:
                return Outcome(kind, polled.status_code, request_id, clean=False, task_id=task_id,
                               why=f"poll {polled.status_code}: {polled.text[:300]}")
            if done:
                return Outcome(kind, 200, request_id, task_id=task_id)
        return Outcome(kind, 200, request_id, task_id=task_id, why="not finished in time")


def _stream_tokens(name: str, text: str) -> int | None:
    """The usage the stream's last usage-bearing event reported."""
    found = None
    for line in text.splitlines():
        if not line.startswith("data:") or line.strip() == "data: [DONE]":
            continue
        try:
            event = json.loads(line[5:])
        except ValueError:
            continue
        if name == "messages":
            if event.get("type") == "message_start":
                found = int(event["message"]["usage"].get("input_tokens", 0))
            elif event.get("type") == "message_delta":
                found = (found or 0) + int(event["usage"]["output_tokens"])
        elif name == "responses":
            if event.get("type") in ("response.completed", "response.incomplete"):
                found = _usage_tokens(name, event["response"])
        elif name == "content":
            found = _usage_tokens(name, event) or found
        elif event.get("usage"):
            found = _usage_tokens(name, event)
    return found


# ---- the money, read where the gateway keeps it ------------------------------------------------

def _dynamodb(endpoint: str):
    import boto3
    from botocore.config import Config

    return boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="local",
                        aws_secret_access_key="local", config=Config(retries={"max_attempts": 10}))


def _query_all(dynamodb, table: str, pk: str) -> list[dict[str, Any]]:
    from gateway.store.aws import from_item

    items, start = [], None
    while True:
        page = dynamodb.query(TableName=table, KeyConditionExpression="pk = :p", ConsistentRead=True,
                              ExpressionAttributeValues={":p": {"S": pk}},
                              **({"ExclusiveStartKey": start} if start else {}))
        items += [from_item(item) for item in page["Items"]]
        start = page.get("LastEvaluatedKey")
        if not start:
            return items


def money(endpoint: str, user_id: int = 1) -> dict[str, Any]:
    """The account's money as the tables hold it: profile, open leases, open reservations, ledger."""
    from gateway.store.aws import from_item
    from gateway.store.holds import lease_pks
    from gateway.store.table import PROFILE, user_pk
    from gateway.store.usage import ledger_pks

    dynamodb = _dynamodb(endpoint)
    profile = from_item(dynamodb.get_item(TableName="AccountsTable", ConsistentRead=True, Key={
        "pk": {"S": user_pk(user_id)}, "sk": {"S": PROFILE}})["Item"])
    leases = [lease for pk in lease_pks(user_id) for lease in _query_all(dynamodb, "AccountsTable", pk)]
    entries = [item for pk in ledger_pks(user_id) for item in _query_all(dynamodb, "AccountsTable", pk)
               if str(item.get("sk", "")).startswith("USAGE#")]
    reservations, start = [], None
    while True:  # every reservation record of the user (a scan: only for a test's small table)
        page = dynamodb.scan(TableName="AccountsTable", ConsistentRead=True, FilterExpression="begins_with(pk, :r)",
                             ExpressionAttributeValues={":r": {"S": "RES#"}}, **({"ExclusiveStartKey": start}
                                                                                  if start else {}))
        reservations += [from_item(item) for item in page["Items"]]
        start = page.get("LastEvaluatedKey")
        if not start:
            break
    tasks, start = [], None
    while True:
        page = dynamodb.scan(TableName="TasksTable", ConsistentRead=True, **({"ExclusiveStartKey": start}
                                                                              if start else {}))
        tasks += [from_item(item) for item in page["Items"]]
        start = page.get("LastEvaluatedKey")
        if not start:
            break
    return {"profile": profile, "leases": leases, "entries": entries,
            "reservations": [r for r in reservations if int(r.get("user_id", -1)) == user_id],
            "tasks": tasks}


def _price_of_tokens(model: str, tokens: int) -> int | None:
    """An upper bound on what `tokens` tokens of `model` may cost: every token at the dearer of its
    input and output prices (the check is that a bill never passes what the answer reported)."""
    from gateway.prices import SHIPPED, usd_to_units

    price = SHIPPED.get(model)
    if price is None or price.input_per_million is None:
        return None
    per_token = max(price.input_per_million, price.output_per_million or Decimal(0)) / Decimal(10**6)
    return usd_to_units(per_token * tokens) + 1


def count(outcomes: list[Outcome], endpoint: str, added: int, *, settle_seconds: float = 90,
          user_id: int = 1) -> Counts:
    """The invariants by counts, once every hold has had time to close (leases fold when their
    instance goes idle or their window ends; the sweeper takes the rest)."""
    counts = Counts(requests=len(outcomes))
    for outcome in outcomes:
        counts.statuses[(outcome.kind.split("+")[0], outcome.status)] += 1
        if not outcome.clean:
            counts.server_errors += 1
            counts.problems.append(f"server error: {outcome.kind} {outcome.request_id}: {outcome.why}")
    deadline = time.monotonic() + settle_seconds
    while True:
        held = money(endpoint, user_id)
        open_leases = [lease for lease in held["leases"] if lease.get("status") == "open"]
        open_holds = [r for r in held["reservations"] if r.get("status") == "reserved"]
        open_tasks = [t for t in held["tasks"] if not t.get("billing") and not t.get("waiting_for")]
        if not (open_holds or open_tasks) or time.monotonic() > deadline:
            break
        time.sleep(2)
    profile = held["profile"]
    quota, used = int(profile.get("quota", 0)), int(profile.get("used_quota", 0))
    leased = sum(int(lease["granted"]) for lease in open_leases)
    spent_open = sum(int(lease["spent"]) for lease in open_leases)
    reserved = sum(int(r["units"]) for r in open_holds)
    drift = added - (quota + used + leased + reserved)
    ledger = sum(int(entry.get("units", 0)) for entry in held["entries"])
    ledger_drift = ledger - (used + spent_open)
    counts.lost_units = abs(drift) + abs(ledger_drift)
    if drift or ledger_drift:
        counts.problems.append(f"units: added {added}, quota {quota} + used {used} + leased {leased} + reserved "
                               f"{reserved} (drift {drift}); ledger {ledger} vs used + open spent "
                               f"{used + spent_open} (drift {ledger_drift})")
    # A lease stays open while its serving process lives (it folds at the next close after its
    # window, when the process goes idle, or by the sweeper after its hold_until); a reservation
    # (a task's) closes when its task ends: one open at the end was never released.
    overdue = [lease for lease in open_leases if int(lease["hold_until"]) < time.time()]
    if overdue or open_holds:
        counts.problems.append(f"open at the end: {len(overdue)} leases past their hold, {len(open_holds)} "
                               "reservations")
        counts.lost_units += sum(int(lease["granted"]) - int(lease["spent"]) for lease in overdue) + reserved
    _charges(counts, outcomes, held)
    _tasks(counts, outcomes, held)
    return counts


def _charges(counts: Counts, outcomes: list[Outcome], held: dict[str, Any]) -> None:
    """Each request billed once, never above what its answer reported, nothing for a failure."""
    by_request: dict[str, list[dict[str, Any]]] = {}
    for entry in held["entries"]:
        by_request.setdefault(str(entry["request_id"]), []).append(entry)
    for request_id, entries in by_request.items():
        if len(entries) > 1:
            counts.double_charges += 1
            counts.problems.append(f"{request_id}: {len(entries)} ledger entries")
    for outcome in outcomes:
        entries = by_request.get(outcome.task_id or outcome.request_id, [])
        charged = sum(int(e.get("units", 0)) for e in entries)
        if outcome.status != 200 and not outcome.task_id and charged:
            counts.double_charges += 1  # a failed request is never charged
            counts.problems.append(f"{outcome.request_id}: answered {outcome.status} yet charged {charged}")
        elif outcome.status == 200 and outcome.tokens is not None and entries:
            ceiling = _price_of_tokens(str(entries[0]["model"]), outcome.tokens)
            if ceiling is not None and charged > ceiling:
                counts.double_charges += 1
                counts.problems.append(f"{outcome.request_id}: charged {charged} for {outcome.tokens} tokens "
                                       f"(at most {ceiling})")
        elif outcome.status == 200 and not outcome.task_id and not entries and outcome.kind != "images":
            counts.lost_units += 1  # answered, never billed
            counts.problems.append(f"{outcome.kind} {outcome.request_id}: answered 200, no ledger entry")


def _tasks(counts: Counts, outcomes: list[Outcome], held: dict[str, Any]) -> None:
    """Every submitted task finished and settled or refunded."""
    tasks = {str(t["task_id"]): t for t in held["tasks"]}
    for outcome in outcomes:
        if not outcome.task_id:
            continue
        task = tasks.get(outcome.task_id)
        if task is None or not task.get("billing") or outcome.why == "not finished in time":
            counts.stuck_tasks += 1
            counts.problems.append(f"task {outcome.task_id}: {task and task.get('status')}, billing "
                                   f"{task and task.get('billing')} ({outcome.why})")
