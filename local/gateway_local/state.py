"""The local runner's data across restarts: the emulator's tables and queues in one file.

`make run` keeps everything it stores (users, keys, quotas, the ledger, plants, tasks, the
messages waiting in its queues and the secrets made at run time: the keys of the channels added
through /api/channel/) in `<state dir>/emulator.jsonl`, by default `.local/state` in
the checkout (git-ignored; `GATEWAY_LOCAL_STATE_DIR` moves it). It is loaded at start, saved
every `GATEWAY_LOCAL_SAVE_SECONDS` (30) when something changed, and at a clean stop (Ctrl-C,
SIGTERM). `make run FRESH=1` (`GATEWAY_LOCAL_FRESH=1`) deletes it first and starts empty.

The file is written beside the old one and renamed over it, so a crash mid-save leaves the
previous save whole. Each line is one JSON object: `{"table": name, "item": <DynamoDB JSON>}`,
`{"secret": name, "value": text, "version": id}` (a secret's current value and its version id,
which the channel's record names; a deleted secret is not kept)
or `{"queue": name, "body": text, "wait": seconds}` (a message, and how long it still has to
wait before it is delivered: its delay, or the rest of its visibility timeout if it was in
flight). What is not kept: a message's receive count (a redrive count starts again) and
anything made outside the template's tables and queues.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the emulator's process runs a State (`emulator._emulator_main`), never the other way
    from gateway_local.emulator import Emulator

FILE_NAME = "emulator.jsonl"
MAX_DELAY_SECONDS = 900  # SQS refuses a longer DelaySeconds


def state_dir(root: Path) -> Path:
    return Path(os.environ.get("GATEWAY_LOCAL_STATE_DIR") or root / ".local" / "state")


def _secrets_backend() -> Any:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.secretsmanager.models import secretsmanager_backends

    return secretsmanager_backends[DEFAULT_ACCOUNT_ID][os.environ.get("AWS_DEFAULT_REGION", "us-east-1")]


def _backends() -> tuple[Any, Any]:
    """moto's DynamoDB and SQS backends of the runner's account and region."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends
    from moto.sqs.models import sqs_backends

    region = os.environ.get("AWS_DEFAULT_REGION", "us-east-1")
    return dynamodb_backends[DEFAULT_ACCOUNT_ID][region], sqs_backends[DEFAULT_ACCOUNT_ID][region]


def demo_credentials(directory: Path, key: str | None, access_token: str | None) -> tuple[str, str]:
    """The demo key and access token: as given, else the ones of the last run, else new ones
    (kept in the state directory, so the demo key printed once keeps working)."""
    from gateway import keys

    path = directory / "demo.json"
    saved = json.loads(path.read_text()) if path.exists() else {}
    chosen = (key or saved.get("key") or keys.new_key(),
              access_token or saved.get("access_token") or keys.new_secret())
    if chosen != (saved.get("key"), saved.get("access_token")):
        _save_demo(directory, {**saved, "key": chosen[0], "access_token": chosen[1]})
    return chosen


def demo_quota_changed(directory: Path, quota: int) -> bool:
    """Whether `quota` (GATEWAY_DEMO_QUOTA) differs from the one the last run applied; records it.
    The first run creates the demo user with it, so a first run reports no change."""
    path = directory / "demo.json"
    saved = json.loads(path.read_text()) if path.exists() else {}
    if saved.get("quota") == quota:
        return False
    _save_demo(directory, {**saved, "quota": quota})
    return "quota" in saved


def _save_demo(directory: Path, demo: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "demo.json").write_text(json.dumps(demo))


def _restore_secret(secrets: Any, name: str, value: str, version: str | None) -> None:
    """The secret as saved, under its saved version id (what a channel's record names)."""
    token = {"ClientRequestToken": version} if version else {}
    try:
        secrets.create_secret(Name=name, SecretString=value, **token)
    except secrets.exceptions.ResourceExistsException:
        secrets.put_secret_value(SecretId=name, SecretString=value, **token)


class State:
    """Loads and saves one emulator's tables and queues (in the emulator's process)."""

    def __init__(self, emulator: Emulator, directory: Path, log: Callable[[str], None] = print):
        self.emulator, self.directory, self.log = emulator, directory, log
        self.path = directory / FILE_NAME
        self._saved_changes = -1
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def wipe(self) -> None:
        for path in (self.path, self.directory / "demo.json"):
            if path.exists():
                path.unlink()

    def load(self) -> dict[str, int]:
        """Puts the saved items and messages into the emulator's (empty) tables and queues."""
        counts = {"items": 0, "messages": 0, "secrets": 0, "skipped": 0}
        if not self.path.exists():
            return counts
        dynamodb, _ = _backends()
        from gateway.store.aws import client

        sqs = client("sqs")
        tables = set(self.emulator.tables.values())
        with self.path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                try:
                    record = json.loads(line)
                except ValueError:
                    raise ValueError(f"{self.path}, line {number}: not JSON; fix or delete the file "
                                     "(`make run FRESH=1` starts empty)") from None
                if "table" in record and record["table"] in tables:
                    with self.emulator.lock:
                        dynamodb.get_table(record["table"]).put_item(record["item"])
                    counts["items"] += 1
                elif "queue" in record and record["queue"] in self.emulator.queues:
                    sqs.send_message(QueueUrl=self.emulator.queues[record["queue"]], MessageBody=record["body"],
                                     DelaySeconds=min(max(int(record.get("wait", 0) + 0.999), 0), MAX_DELAY_SECONDS))
                    counts["messages"] += 1
                elif "secret" in record:
                    _restore_secret(client("secretsmanager"), record["secret"], record["value"],
                                    record.get("version"))
                    counts["secrets"] += 1
                else:  # a table or queue the template no longer has
                    counts["skipped"] += 1
        self._saved_changes = self.emulator.changes
        return counts

    def _snapshot(self) -> list[dict[str, Any]]:
        dynamodb, sqs = _backends()
        records: list[dict[str, Any]] = []
        now_ms = time.time() * 1000
        for name in self.emulator.tables.values():
            table = dynamodb.get_table(name)
            records.extend({"table": name, "item": item.to_json()["Attributes"]} for item in table.all_items())
        queue_names = {url.rsplit("/", 1)[-1]: logical for logical, url in self.emulator.queues.items()}
        for name, queue in sqs.queues.items():
            if name in queue_names:
                for message in list(queue._messages):
                    wait = max(message.delayed_until, message.visible_at, now_ms) - now_ms
                    records.append({"queue": queue_names[name], "body": message.body, "wait": round(wait / 1000, 3)})
        for name, secret in list(_secrets_backend().secrets.items()):
            if not secret.is_deleted() and isinstance(getattr(secret, "secret_string", None), str):
                records.append({"secret": name, "value": secret.secret_string,
                                "version": secret.default_version_id})
        return records

    def save(self) -> bool:
        """Writes the emulator's data if it changed since the last load or save. True if written."""
        with self.emulator.lock:  # a consistent picture: no AWS call runs meanwhile
            changes = self.emulator.changes
            if changes == self._saved_changes:
                return False
            records = self._snapshot()
        self.directory.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".partial")
        with partial.open("w", encoding="utf-8") as out:
            for record in records:
                out.write(json.dumps(record, separators=(",", ":")) + "\n")
        os.replace(partial, self.path)
        self._saved_changes = changes
        return True

    def autosave(self, every_seconds: float) -> None:
        def run() -> None:
            while not self._stopping.wait(every_seconds):
                try:
                    self.save()
                except Exception as exc:  # a failed save is retried at the next round
                    self.log(f"state: saving failed: {exc!r}")

        self._thread = threading.Thread(target=run, name="state-autosave", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stops the autosave and saves one last time."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.save()

