"""Helpers of the task tests: the task simulators, the clock the test moves, the queues driven by
hand and calls of the functions in-process (their fixtures are in conftest.py)."""

from __future__ import annotations

import json
import os

from gateway.store.aws import client
from gateway.store.tasks import TasksRepository
from gateway_local.server import sqs_step
from gateway_local.simulators import alpha, beta, delta, epsilon, gamma, imgtask, zeta
from tests.conftest import api_event

SIMULATORS = {"delta": delta, "zeta": zeta, "epsilon": epsilon, "gamma": gamma, "beta": beta, "imgtask": imgtask,
              "alpha": alpha}
TASK_SECONDS = 30  # simulated: a task finishes when the test moves the clock past this


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float = TASK_SECONDS + 1) -> None:
        self.now += seconds


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def call(fn, ctx, method: str, path: str, key: str, *, body=None, query=None, resource=None, path_parameters=None,
         headers=None):
    payload = body if body is None or isinstance(body, str) else json.dumps(body)
    answer = fn.lambda_handler(api_event(method, path, body=payload, headers={**auth(key), **(headers or {})},
                                         query=query, resource=resource, path_parameters=path_parameters), ctx)
    return answer


def status_and_json(answer: dict) -> tuple[int, dict]:
    return answer["statusCode"], json.loads(answer["body"])


class Queues:
    """The template's queues, driven the way the local runner drives them."""

    def __init__(self, aws, functions) -> None:
        self.sqs = client("sqs")
        self.aws, self.functions = aws, functions

    def url(self, logical_id: str) -> str:
        return self.aws.queues[logical_id]

    def arn(self, logical_id: str) -> str:
        return self.sqs.get_queue_attributes(QueueUrl=self.url(logical_id),
                                             AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    def depth(self, logical_id: str) -> int:
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.url(logical_id), AttributeNames=[
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])["Attributes"]
        return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])

    def run(self, logical_id: str, function: str, ctx, *, rounds: int = 20) -> int:
        """Invokes `function` on the queue until it is empty (at most `rounds` batches)."""
        done = 0
        for _ in range(rounds):
            waiting = self.sqs.get_queue_attributes(QueueUrl=self.url(logical_id), AttributeNames=[
                "ApproximateNumberOfMessages"])["Attributes"]["ApproximateNumberOfMessages"]
            if waiting == "0":
                return done
            sqs_step(self.sqs, self.url(logical_id), self.arn(logical_id), 10,
                     self.functions[function].lambda_handler, function, True)
            done += 1
        return done

    def polls(self, ctx, rounds: int = 20) -> int:
        return self.run("TaskPollQueue", "task_poller", ctx, rounds=rounds)

    def callbacks(self, ctx, rounds: int = 20) -> int:
        return self.run("CallbackQueue", "callback_sender", ctx, rounds=rounds)

    def purge(self, logical_id: str) -> None:
        """Receives and deletes everything (a lost message)."""
        while True:
            messages = self.sqs.receive_message(QueueUrl=self.url(logical_id), MaxNumberOfMessages=10,
                                                WaitTimeSeconds=0).get("Messages", [])
            if not messages:
                return
            for message in messages:
                self.sqs.delete_message(QueueUrl=self.url(logical_id), ReceiptHandle=message["ReceiptHandle"])


def ledger_of(accounts, task_id: str, user_id: int = 1) -> list[dict]:
    return [entry for entry in accounts.usage.ledger(user_id) if entry["request_id"] == task_id]


def stored(task_id: str) -> dict | None:
    """The stored item of a task (what DynamoDB holds), or None."""
    task = TasksRepository().get(task_id)
    return None if task is None else task.item()


def task_count() -> int:
    return client("dynamodb").scan(TableName=os.environ["TASKS_TABLE"], Select="COUNT")["Count"]
