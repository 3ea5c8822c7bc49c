"""The admin command line's operator commands, and how it finds its tables by itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from gateway import admin
from gateway.admission import billing
from gateway.auth import authenticate, clear_cache
from gateway.errors import AuthenticationFailed
from gateway.store.table import KeyNotFound
from tests.conftest import ROOT


def test_list_users_counts_what_open_quota_leases_hold_and_spent(demo):
    # Given a request held and settled on the demo user's quota lease (still open, not folded)
    from gateway.store import holds

    before = next(u for u in admin.run(["list-users"])["users"] if u["username"] == "demo")
    principal = authenticate({"x-api-key": demo["key"]})
    held = billing.reserve_request(principal, 500, model="m-small", route="test", request_id="listed")
    billing.settle(held, 120)
    assert holds.open_leases(1), "the lease is still open"
    # Then the operator's list shows the quota and the spend as the user sees them
    after = next(u for u in admin.run(["list-users"])["users"] if u["username"] == "demo")
    assert after["quota"] == before["quota"] - 120
    assert after["used_quota"] == before["used_quota"] + 120 and after["request_count"] == before["request_count"] + 1


def test_list_disable_and_enable_users(demo, capsys):
    other = admin.run(["create-user", "--username", "bo"])
    users = admin.run(["list-users"])["users"]
    assert [u["username"] for u in users] == ["demo", "bo"] and "access_token" not in users[0]
    issued = admin.run(["issue-key", "--user", str(other["user_id"]), "--name", "a"])
    revoked = admin.run(["issue-key", "--user", str(other["user_id"]), "--name", "b"])
    admin.run(["revoke-key", revoked["key_id"]])

    disabled = admin.run(["disable-user", "--user", str(other["user_id"])])
    assert disabled["keys_disabled"] == [issued["key_id"]]
    clear_cache()
    with pytest.raises(AuthenticationFailed):
        authenticate({"x-api-key": issued["key"]})
    assert authenticate({"x-api-key": demo["key"]}).user_id == 1  # nobody else's keys

    assert admin.run(["enable-user", "--user", str(other["user_id"])])["keys_enabled"] == [issued["key_id"]]
    clear_cache()
    assert authenticate({"x-api-key": issued["key"]}).user_id == other["user_id"]
    states = {k["key_id"]: k["status"] for k in admin.run(["list-keys", "--user", str(other["user_id"])])["keys"]}
    assert states == {issued["key_id"]: "active", revoked["key_id"]: "revoked"}  # revoked stays revoked
    assert admin.main(["disable-user", "--user", "999"]) == 1


def test_delete_key_removes_it_for_good(demo):
    issued = admin.run(["issue-key", "--user", "1", "--name", "gone"])
    assert admin.run(["delete-key", issued["key_id"]]) == {"key_id": issued["key_id"], "deleted": True}
    assert issued["key_id"] not in [k["key_id"] for k in admin.run(["list-keys", "--user", "1"])["keys"]]
    clear_cache()
    with pytest.raises(AuthenticationFailed):
        authenticate({"x-api-key": issued["key"]})
    with pytest.raises(KeyNotFound):
        admin.run(["delete-key", issued["key_id"]])


def test_usage_by_model_sums_the_ledger_per_model_and_day(demo):
    principal = authenticate({"x-api-key": demo["key"]})
    for model, units in (("m-small", 100), ("m-small", 50), ("iota-image-1", 20000)):
        held = billing.reserve_request(principal, units * 2, model=model, route="/r", request_id=uuid.uuid4().hex)
        billing.settle(held, units)
    rows = admin.run(["usage", "--user", "1", "--by", "model"])["rows"]
    assert [(r["model"], r["requests"], r["units"]) for r in rows] == [("iota-image-1", 1, 20000),
                                                                       ("m-small", 2, 150)]
    assert rows[1]["usd"] == "0.0003" and len(rows[0]["day"]) == 10


def admin_process(args: list[str], cwd, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "ACCOUNTS_", "TASKS_", "GATEWAY_"))}
    env.update({"PYTHONPATH": f"{ROOT / 'layers' / 'gateway'}:{ROOT / 'local'}", **(extra or {})})
    return subprocess.run([sys.executable, "-m", "gateway.admin", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60)


def endpoint_file(folder, store, pid: int) -> None:
    (folder / ".local").mkdir(parents=True)
    environment = {**store.environment(), "AWS_ENDPOINT_URL": store.endpoint_url, "AWS_ACCESS_KEY_ID": "local",
                   "AWS_SECRET_ACCESS_KEY": "local", "AWS_DEFAULT_REGION": "us-east-1"}
    (folder / ".local" / "gateway.json").write_text(json.dumps({"pid": pid, "environment": environment}))


def test_the_command_line_finds_the_running_local_gateway_with_no_aws_variables(demo, store, tmp_path):
    endpoint_file(tmp_path, store, os.getpid())
    below = tmp_path / "some" / "folder"
    below.mkdir(parents=True)
    done = admin_process(["create-user", "--username", "ann"], below)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["username"] == "ann"
    assert "ann" in [u["username"] for u in admin.run(["list-users"])["users"]]


def test_a_stale_endpoint_file_is_named_not_followed(store, tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    endpoint_file(tmp_path, store, int(dead.stdout))
    done = admin_process(["list-users"], tmp_path)
    assert done.returncode == 2 and "is not running" in done.stderr and "make run" in done.stderr


def test_a_stack_that_cannot_be_read_is_a_clear_error(store, tmp_path):
    done = admin_process(["--stack", "no-such-stack", "--region", "us-east-1", "list-users"], tmp_path,
                         {"AWS_ENDPOINT_URL": store.endpoint_url, "AWS_ACCESS_KEY_ID": "x",
                          "AWS_SECRET_ACCESS_KEY": "x"})
    assert done.returncode == 2 and "--stack no-such-stack" in done.stderr


def test_with_no_gateway_running_and_no_aws_settings_it_says_what_to_do(tmp_path):
    done = admin_process(["list-users"], tmp_path, {"AWS_CONFIG_FILE": str(tmp_path / "none"),
                                                    "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")})
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "make run" in json.loads(done.stderr)["hint"]


def test_a_disabled_users_access_token_is_refused_until_it_is_enabled(demo):
    from gateway.api import account

    token, user = f"Bearer {demo['access_token']}", str(demo["user_id"])
    assert account.user_self(token, user)["data"]["id"] == demo["user_id"]
    # When the user is disabled, Then its access token is refused, for its account and its log alike
    admin.run(["disable-user", "--user", user])
    with pytest.raises(AuthenticationFailed, match="disabled"):
        account.user_self(token, user)
    with pytest.raises(AuthenticationFailed, match="disabled"):
        account.access_token_user(token, user)
    # When it is enabled again, Then the token works again
    admin.run(["enable-user", "--user", user])
    assert account.access_token_user(token, user) == demo["user_id"]
