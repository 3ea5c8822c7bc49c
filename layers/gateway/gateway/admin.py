"""Admin command line: users, keys, quotas and usage, against whatever DynamoDB
`AWS_ENDPOINT_URL` points to (the local emulator, DynamoDB Local, or real AWS when unset).

    python -m gateway.admin create-user --username alice --quota-usd 20
    python -m gateway.admin issue-key --user 2 --name laptop [--quota-usd 5] [--expires-in-days 30]
        [--models m-small,m-large] [--rpm 60] [--tpm 100000] [--max-parallel 4] [--budget-usd 10 --budget-period daily]
    python -m gateway.admin set-limits (--user 2 | --key KEY_ID) [--rpm N] [--tpm N] [--max-parallel N]
        [--budget-usd USD --budget-period daily|weekly|monthly]   (0 clears one)
    python -m gateway.admin list-keys --user 2
    python -m gateway.admin revoke-key <key id>
    python -m gateway.admin add-quota --user 2 --usd 10        (or --key <key id>, or --units N)
    python -m gateway.admin set-access-token --user 2          (prints a new system access token)
    python -m gateway.admin set-password --user 2 [--password P]  (prompts twice without --password)
    python -m gateway.admin usage --user 2 [--start 2026-11-01] [--end 2026-11-30]
        [--key <key id> | --model <model>] [--by model]
    python -m gateway.admin logs --user 2 [--key <key id>] [--since 2h] [--until ...] [--model m] [--type 5]
        [--limit 50] [--cursor c]
    python -m gateway.admin channels                           (each channel's health: state, cooldown end,
                                                               failures, last error, last probe)
    python -m gateway.admin channel-disable <name>             (never picked, never lifted by a probe)
    python -m gateway.admin channel-enable <name>              (healthy at once: disable and cooldown lifted)

The accounts table is `ACCOUNTS_TABLE` (the stack output `AccountsTableName` when deployed).
Every command prints one JSON object. A key and an access token are printed once, when made.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from gateway import keys
from gateway.admission import balances
from gateway.api import requestlog
from gateway.api.account import parse_date
from gateway.errors import GatewayError
from gateway.limit_values import OPERATOR_LIMITS, PERIODS, Limits
from gateway.prices import UNITS_PER_USD, usd_to_units
from gateway.store.keys import KeysRepository
from gateway.store.table import KeyNotFound, UserNotFound
from gateway.store.usage import UsageRepository
from gateway.store.users import UsersRepository


def ensure_demo_account(*, user_id: int, key: str, quota: int, access_token: str, set_quota: bool = False,
                        username: str = "demo") -> int:
    """The local demo user (`username`), its system access token and an unlimited key (its quota is the user's).
    A new user starts with `quota`; an existing one keeps what it has left unless `set_quota`.
    Returns the user's quota now."""
    users = UsersRepository()
    user = balances.get_user(user_id)
    if user is None:
        users.create_user(username=username, display_name="Demo user", email=f"{username}@example.com",
                          role=100, quota=quota, user_id=user_id)
        left = quota
    else:
        # A store kept from before names were claimed with their profile: the name is the demo's.
        users.claim_username(user_id, str(user.get("username") or username))
        left = int(user.get("quota", 0))
        if set_quota and left != quota:  # at start, before any request can hold a part of it
            left = balances.add_user_quota(user_id, quota - left)
    users.raise_user_counter(user_id)  # a store kept from before the counter followed explicit ids
    users.set_access_token(user_id, access_token)
    if balances.get_key(keys.hash_secret(key)) is None:
        KeysRepository().create_key(user_id, name="demo", key=key)
    return left


def _units(args: argparse.Namespace) -> int | None:
    """The amount given as units or as USD (`--quota`/`--quota-usd` or `--units`/`--usd`)."""
    if args.units is not None:
        return args.units
    return usd_to_units(args.usd) if args.usd is not None else None


def _usd(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise argparse.ArgumentTypeError(f"not an amount: {text}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("an amount cannot be negative")
    return value


def _key_view(record: dict[str, Any]) -> dict[str, Any]:
    return {**{name: record.get(name) for name in (
        "key_id", "user_id", "name", "status", "unlimited", "remain_quota", "used_quota", "expires_at",
        "allowed_models", "created_at", "last_used_at")}, "limits": Limits.of(record).view(),
        "operator_limits": {k: v for k, v in Limits.operator_set(record).view().items() if v}}


def _limits(args: argparse.Namespace, current: Limits) -> Limits:
    """The limits after the flags given (0 clears one; a budget needs its period)."""
    budget = usd_to_units(args.budget_usd) if args.budget_usd is not None else None
    period = args.budget_period if budget != 0 else ""
    return current.replace(rpm=args.rpm, tpm=args.tpm, max_parallel=args.max_parallel, budget_units=budget,
                           budget_period=period)


def set_limits(args: argparse.Namespace) -> dict[str, Any]:
    if args.user is not None:
        record = balances.get_user(args.user)
        if record is None:
            raise UserNotFound(args.user)
    else:
        record = balances.get_key(KeysRepository().key_hash_for_id(args.key))
    before = Limits.of(record)
    after = _limits(args, before)
    attributes = after.attributes(clearing=True)
    if args.key is not None:  # marked as the operator's: the key's owner may tighten them, never loosen them
        marks = _limits(args, Limits.operator_set(record)).attributes()
        attributes[OPERATOR_LIMITS] = marks or None
    UsersRepository().set_limits(limits=attributes, user_id=args.user, key_id=args.key)
    return {("user_id" if args.user is not None else "key_id"): args.user if args.user is not None else args.key,
            "limits": after.view()}


def run(argv: Sequence[str]) -> dict[str, Any]:
    args = _parser().parse_args(argv)
    users, api_keys = UsersRepository(), KeysRepository()
    if args.command == "create-user":
        token = keys.new_secret()
        user = users.create_user(username=args.username, email=args.email or "", quota=_units(args) or 0,
                                 user_id=args.id, role=args.role, access_token=token)
        return {"user_id": user["id"], "username": user["username"], "quota": user["quota"],
                "access_token": token}
    if args.command == "issue-key":
        if args.expires_in_days is not None and args.expires_in_days < 1:
            raise ValueError("--expires-in-days must be at least 1 (omit it for a key that never expires)")
        expires_at = args.expires_at or (int(time.time()) + args.expires_in_days * 86400 if args.expires_in_days else 0)
        models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else None
        given = _limits(args, Limits()).attributes()  # the flags given: the operator's, marked as such
        secret, record = api_keys.create_key(args.user, name=args.name, quota=_units(args),
                                             expires_at=expires_at, allowed_models=models,
                                             limits={**_limits(args, Limits.defaults()).attributes(),
                                                     **({OPERATOR_LIMITS: given} if given else {})})
        return {"key": secret, **_key_view(record)}
    if args.command == "list-keys":
        return {"user_id": args.user, "keys": [_key_view(k) for k in balances.list_keys(args.user)]}
    if args.command == "revoke-key":
        api_keys.revoke_key(args.key_id)
        return {"key_id": args.key_id, "status": "revoked"}
    if args.command == "add-quota":
        units = _units(args)
        if units is None:  # argparse requires one of the two amounts
            raise SystemExit("add-quota: give --units or --usd")
        if args.key:
            return {"key_id": args.key, "remain_quota": api_keys.add_key_quota(args.key, units)}
        return {"user_id": args.user, "quota": balances.add_user_quota(args.user, units)}
    if args.command == "set-access-token":
        token = args.token or keys.new_secret()
        users.set_access_token(args.user, token)
        return {"user_id": args.user, "access_token": token}
    if args.command == "usage" and args.by == "model":
        return usage_by_model(args)
    if args.command == "usage":
        profile = balances.get_user(args.user)
        if profile is None:
            raise UserNotFound(args.user)
        total = balances.usage(args.user, start=parse_date("start", args.start),
                               end=parse_date("end", args.end, end=True), key_id=args.key, model=args.model)
        return {"user_id": args.user, "requests": total.requests, "units": total.units,
                "usd": str(Decimal(total.units) / UNITS_PER_USD), "quota_left": profile["quota"],
                "used_quota": profile["used_quota"], "request_count": profile["request_count"]}
    if args.command == "logs":
        return _logs(args)
    if args.command in OPERATOR_COMMANDS:
        return OPERATOR_COMMANDS[args.command](args)
    raise AssertionError(args.command)  # argparse only lets known commands through


def _logs(args: argparse.Namespace) -> dict[str, Any]:
    """The request log of a user (or one of its keys), as the log routes show it, plus the key id."""
    if balances.get_user(args.user) is None:
        raise UserNotFound(args.user)
    names = {key["key_id"]: key.get("name", "") for key in balances.list_keys(args.user, include_deleted=True)}
    if args.key and args.key not in names:
        raise KeyNotFound(f"{args.key} (not a key of user {args.user})")
    params = {"page_size": str(args.limit), "start_timestamp": args.since, "end_timestamp": args.until,
              "model_name": args.model, "type": args.type, "cursor": args.cursor}
    query = requestlog.LogQuery({k: v for k, v in params.items() if v is not None})
    return {"user_id": args.user, **requestlog.read(args.user, query, key_ids=(args.key,) if args.key else None,
                                                    key_names=names)}


_RELATIVE = re.compile(r"([0-9]+)([smhd])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _moment(text: str) -> str:
    """Epoch seconds (as text) from `2h` / `30m` / `7d` ago, a YYYY-MM-DD date, an ISO time or epoch seconds."""
    value = text.strip()
    if value.isdigit():
        return value
    relative = _RELATIVE.fullmatch(value)
    if relative:
        return str(int(time.time()) - int(relative.group(1)) * _SECONDS[relative.group(2)])
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time: {text} (use 2h, 30m, 7d, YYYY-MM-DD, an ISO time "
                                         "or epoch seconds)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return str(int(moment.timestamp()))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gateway.admin", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def amount(p: argparse.ArgumentParser, required: bool, units_flag: str, usd_flag: str) -> None:
        group = p.add_mutually_exclusive_group(required=required)
        group.add_argument(units_flag, dest="units", type=int, help="quota units (500000 per USD)")
        group.add_argument(usd_flag, dest="usd", type=_usd, help="amount in USD")

    p = commands.add_parser("create-user", help="create a user (prints its system access token)")
    p.add_argument("--username", required=True)
    p.add_argument("--email")
    p.add_argument("--id", type=int, help="explicit user id (default: the next free one)")
    p.add_argument("--role", type=int, default=1)
    amount(p, False, "--quota", "--quota-usd")

    p = commands.add_parser("issue-key", help="issue an API key (printed once)")
    p.add_argument("--user", type=int, required=True)
    p.add_argument("--name", required=True)
    amount(p, False, "--quota", "--quota-usd")
    p.add_argument("--expires-at", type=int, default=0, help="epoch seconds")
    p.add_argument("--expires-in-days", type=int, help="days from now, at least 1 (omit: never expires)")
    p.add_argument("--models", help="comma-separated allowlist (default: every model)")
    _add_limit_options(p)

    p = commands.add_parser("list-keys", help="list a user's keys")
    p.add_argument("--user", type=int, required=True)

    p = commands.add_parser("revoke-key", help="revoke a key by its id")
    p.add_argument("key_id")

    p = commands.add_parser("add-quota", help="add quota on top of what is left (user or limited key)")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--user", type=int)
    target.add_argument("--key", help="key id")
    amount(p, True, "--units", "--usd")

    p = commands.add_parser("set-access-token", help="set (or generate) a user's system access token")
    p.add_argument("--user", type=int, required=True)
    p.add_argument("--token")

    p = commands.add_parser("usage", help="a user's ledger totals")
    p.add_argument("--user", type=int, required=True)
    p.add_argument("--start", help="ms timestamp or YYYY-MM-DD")
    p.add_argument("--end", help="ms timestamp or YYYY-MM-DD")
    only = p.add_mutually_exclusive_group()
    only.add_argument("--key", help="only this key id")
    only.add_argument("--model", help="only this model")
    p.add_argument("--by", choices=["model"], help="spend per model and day")

    p = commands.add_parser("logs", help="a user's request log, newest first")
    p.add_argument("--user", type=int, required=True)
    p.add_argument("--key", help="only this key id")
    p.add_argument("--since", type=_moment, help="2h, 30m, 7d ago, YYYY-MM-DD, an ISO time or epoch seconds")
    p.add_argument("--until", type=_moment, help="same forms as --since (inclusive)")
    p.add_argument("--model", help="only this model")
    p.add_argument("--type", choices=["2", "5", "6"], help="2 consume, 5 error, 6 refund")
    p.add_argument("--limit", type=int, default=20, help=f"entries (1 to {requestlog.PAGE_SIZE_MAX})")
    p.add_argument("--cursor", help="next_cursor of an earlier answer")
    _add_operator_commands(commands)
    _add_target_options(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # The command line names channels and their health; it never calls an upstream, so it reads no
    # channel key (an operator may list channels without being allowed to read the keys secret).
    keys_needed = os.environ.get("GATEWAY_CHANNEL_KEYS_NEEDED")
    os.environ["GATEWAY_CHANNEL_KEYS_NEEDED"] = "false"
    try:
        use_target(_parser().parse_args(argv))
        result = run(argv)
    except (UserNotFound, KeyNotFound) as exc:
        print(json.dumps({"error": f"not found: {exc.__class__.__name__} {exc}"}), file=sys.stderr)
        return 1
    except (ValueError, GatewayError, TargetError) as exc:
        print(json.dumps({"error": str(exc)}), file=sys.stderr)
        return 2
    except Exception as exc:
        if not type(exc).__module__.startswith("botocore"):
            raise
        # No region, no credentials, nothing listening: say where it looked and what to do.
        print(json.dumps({"error": f"AWS: {exc}", "hint": (
            "start the local gateway (make run) and run this from its folder, or set AWS_ENDPOINT_URL, "
            "or name a deployed stack with --stack (and --profile / --region)")}), file=sys.stderr)
        return 2
    finally:
        from gateway.settings import reload_settings

        if keys_needed is None:
            os.environ.pop("GATEWAY_CHANNEL_KEYS_NEEDED", None)
        else:
            os.environ["GATEWAY_CHANNEL_KEYS_NEEDED"] = keys_needed
        reload_settings()
    print(json.dumps(result, indent=2, default=str))
    return 0


# ---- operator commands: users, key deletion, spend per model --------------------------------

def list_users(args: argparse.Namespace) -> dict[str, Any]:
    return {"users": [{**{name: user.get(name) for name in (
        "id", "username", "email", "status", "quota", "used_quota", "request_count", "created_at")},
        "limits": Limits.of(user).view()} for user in balances.list_users()]}


def disable_user(args: argparse.Namespace) -> dict[str, Any]:
    changed = UsersRepository().set_user_enabled(args.user, False)
    return {"user_id": args.user, "status": "disabled", "keys_disabled": changed}


def enable_user(args: argparse.Namespace) -> dict[str, Any]:
    changed = UsersRepository().set_user_enabled(args.user, True)
    return {"user_id": args.user, "status": "enabled", "keys_enabled": changed}


def set_password(args: argparse.Namespace) -> dict[str, Any]:
    """The console's password of a user: given, or asked for twice without echo."""
    import getpass

    from gateway.api.session import set_password as store_password

    password = args.password
    if password is None:
        password = getpass.getpass("New password: ")
        if getpass.getpass("Again: ") != password:
            raise ValueError("the two passwords differ")
    store_password(args.user, password)
    user = balances.get_user(args.user) or {}
    return {"user_id": args.user, "username": user.get("username"), "password": "set"}


def delete_key(args: argparse.Namespace) -> dict[str, Any]:
    KeysRepository().delete_key(args.key_id)
    return {"key_id": args.key_id, "deleted": True}


def usage_by_model(args: argparse.Namespace) -> dict[str, Any]:
    """A user's spend per model and UTC day, from the same ledger read as `usage`."""
    if balances.get_user(args.user) is None:
        raise UserNotFound(args.user)
    entries = UsageRepository().ledger(args.user, start=parse_date("start", args.start),
                                       end=parse_date("end", args.end), key_id=args.key)
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in entries:
        day = str(entry.get("sk", "USAGE#")).removeprefix("USAGE#")[:10]
        row = rows.setdefault((day, str(entry.get("model") or "")), {"requests": 0, "units": 0})
        row["requests"] += 1
        row["units"] += int(entry.get("units", 0))
    return {"user_id": args.user, "by": "model", "rows": [
        {"day": day, "model": model, **row, "usd": str(Decimal(row["units"]) / UNITS_PER_USD)}
        for (day, model), row in sorted(rows.items())]}


def list_channels(args: argparse.Namespace) -> dict[str, Any]:
    """Every channel of the channels document with its health, then any health item of a channel
    the document no longer names. Read from the store itself, never a cache."""
    from gateway.routing.channels import get_catalog
    from gateway.routing.health import book, channels_view

    rows = channels_view(get_catalog(), book().store.all())
    return {"now": datetime.now(UTC).isoformat(timespec="seconds"), "channels": rows}


def _channel_command(args: argparse.Namespace, enable: bool) -> dict[str, Any]:
    from gateway.routing.channels import get_catalog
    from gateway.routing.health import book

    if get_catalog().named(args.name) is None and args.name not in {h.name for h in book().store.all()}:
        raise ValueError(f"no channel named {args.name!r} in the channels document")
    return {"name": args.name, **book().command(args.name, enable=enable).view()}


def enable_channel(args: argparse.Namespace) -> dict[str, Any]:
    return _channel_command(args, enable=True)


def disable_channel(args: argparse.Namespace) -> dict[str, Any]:
    return _channel_command(args, enable=False)


def outbox(args: argparse.Namespace) -> dict[str, Any]:
    """The newest messages `make run` sent (sign-up codes, resets): its local outbox, as the running
    gateway's endpoint file names it."""
    from gateway.commerce import mail

    found = local_endpoint_file()
    folder = os.environ.get("GATEWAY_MAIL_OUTBOX") or (
        read_endpoint_file(found).get("function_environment", {}).get("GATEWAY_MAIL_OUTBOX") if found else None)
    if not folder:
        raise ValueError("no local outbox: start the local gateway (make run); deployed, mail goes through SES")
    return {"outbox": folder, "messages": mail.outbox(args.limit, folder)}


OPERATOR_COMMANDS = {"outbox": outbox, "set-limits": set_limits, "list-users": list_users, "disable-user": disable_user,
                     "enable-user": enable_user, "delete-key": delete_key, "set-password": set_password,
                     "channels": list_channels,
                     "channel-enable": enable_channel, "channel-disable": disable_channel}


def _add_limit_options(parser: argparse.ArgumentParser) -> None:
    def count(text: str) -> int:
        if not text.isdigit():
            raise argparse.ArgumentTypeError(f"not a whole number of at least 0: {text}")
        return int(text)

    parser.add_argument("--rpm", type=count, help="requests per minute (0: no limit)")
    parser.add_argument("--tpm", type=count, help="tokens (prompt + completion) per minute (0: no limit)")
    parser.add_argument("--max-parallel", type=count, help="concurrent requests (0: no limit)")
    parser.add_argument("--budget-usd", type=_usd, help="spend cap per period in USD (0: no budget)")
    parser.add_argument("--budget-period", choices=PERIODS, help="when the budget resets (UTC calendar)")


def _add_operator_commands(commands: Any) -> None:
    p = commands.add_parser("set-limits", help="set a user's or a key's limits (0 clears one)")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--user", type=int)
    target.add_argument("--key", help="key id")
    _add_limit_options(p)
    commands.add_parser("list-users", help="every user, with quota and spend")
    p = commands.add_parser("disable-user", help="disable a user and refuse each of its keys at once")
    p.add_argument("--user", type=int, required=True)
    p = commands.add_parser("enable-user", help="enable a disabled user and the keys disabling took")
    p.add_argument("--user", type=int, required=True)
    p = commands.add_parser("set-password", help="set a user's console password (prompts without --password)")
    p.add_argument("--user", type=int, required=True)
    p.add_argument("--password", help="8 to 256 characters (default: asked for twice, not echoed)")
    p = commands.add_parser("delete-key", help="delete a key for good (its ledger entries stay)")
    p.add_argument("key_id")
    commands.add_parser("channels", help="each channel's health: state, cooldown end, failures, last error, "
                                          "last probe")
    p = commands.add_parser("channel-disable", help="take a channel out until channel-enable (no probe lifts it)")
    p.add_argument("name")
    p = commands.add_parser("channel-enable", help="bring a channel back at once (lifts a disable or a cooldown)")
    p.add_argument("name")
    p = commands.add_parser("outbox", help="the newest mail make run sent (sign-up codes, password resets)")
    p.add_argument("--limit", type=int, default=10)


# ---- which DynamoDB: the running local gateway, or a deployed stack ------------------------

LOCAL_ENDPOINT_FILE = Path(".local") / "gateway.json"


class TargetError(RuntimeError):
    pass


def _add_target_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", help="deployed stack whose tables to use (default: GATEWAY_STACK, else the "
                                        "running local gateway, else ACCOUNTS_TABLE)")
    parser.add_argument("--profile", help="AWS profile (default: AWS_PROFILE or the default profile)")
    parser.add_argument("--region", help="AWS region (default: AWS_REGION / AWS_DEFAULT_REGION or the profile's)")


def local_endpoint_file(start: Path | None = None) -> Path | None:
    """`.local/gateway.json` in this directory or the nearest parent (the local runner writes it)."""
    configured = os.environ.get("GATEWAY_LOCAL_ENDPOINT_FILE")
    if configured:
        return Path(configured) if Path(configured).is_file() else None
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / LOCAL_ENDPOINT_FILE).is_file():
            return folder / LOCAL_ENDPOINT_FILE
    return None


def use_target(args: argparse.Namespace) -> str:
    """Points the AWS clients at the right tables before the first call; returns what it chose.

    `--stack` (or GATEWAY_STACK): the stack's outputs name the tables, with the profile and region
    given or the usual defaults. Else AWS_ENDPOINT_URL as set. Else the running local gateway's
    endpoint file. Else real AWS with ACCOUNTS_TABLE as set."""
    from gateway.settings import reload_settings
    from gateway.store.aws import reset_clients

    if args.profile:
        os.environ["AWS_PROFILE"] = args.profile
    if args.region:
        os.environ["AWS_DEFAULT_REGION"] = args.region
    stack = args.stack or os.environ.get("GATEWAY_STACK")
    chosen = "environment"
    if stack:
        os.environ.update(_stack_tables(stack))
        chosen = f"stack {stack}"
    elif not os.environ.get("AWS_ENDPOINT_URL"):
        found = local_endpoint_file()
        if found is not None:
            os.environ.update(_local_environment(found))
            # The local emulator's own region and credentials: a profile named in the shell
            # (perhaps one this machine lacks) must not be looked up.
            for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_SESSION_TOKEN"):
                os.environ.pop(name, None)
            chosen = f"local gateway ({found})"
    reset_clients()
    reload_settings()
    return chosen


def _local_environment(path: Path) -> dict[str, str]:
    return {str(k): str(v) for k, v in read_endpoint_file(path)["environment"].items()}


def read_endpoint_file(path: Path) -> dict[str, Any]:
    """What a running local gateway wrote to its endpoint file (`environment` and more); a
    `TargetError` naming the file when it is not one, or its gateway is no longer running."""
    try:
        data = json.loads(path.read_text())
        pid = int(data["pid"])
        if not isinstance(data["environment"], dict):
            raise TypeError("environment is not an object")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TargetError(f"{path}: not a local gateway endpoint file ({exc})") from None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise TargetError(f"{path}: the local gateway that wrote it (pid {pid}) is not running; "
                          "start it with `make run`, or set AWS_ENDPOINT_URL") from None
    except PermissionError:
        pass  # running, as another user
    return data


# The stack outputs the command line reads, and the variable each one sets.
STACK_OUTPUTS = {"AccountsTableName": "ACCOUNTS_TABLE"}
# The stack parameters naming the channels document's source, and the variable each one sets (the
# secret's before the parameter's: routing/document.py reads a channels secret first).
STACK_CHANNEL_SOURCES = {"ChannelsParameterName": "GATEWAY_CHANNELS_PARAMETER",
                         "ChannelsSecretName": "GATEWAY_CHANNELS_SECRET"}


def _stack_tables(stack: str) -> dict[str, str]:
    import botocore.session

    session = botocore.session.Session(profile=os.environ.get("AWS_PROFILE") or None)
    try:
        stacks = session.create_client("cloudformation").describe_stacks(StackName=stack)["Stacks"]
    except Exception as exc:  # no credentials, no such stack, no network: say which
        raise TargetError(f"--stack {stack}: cannot read the stack's outputs: {exc}") from None
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    missing = [name for name in STACK_OUTPUTS if name not in outputs]
    if missing:
        raise TargetError(f"--stack {stack}: the stack has no output {', '.join(missing)}")
    parameters = {p["ParameterKey"]: p.get("ParameterValue") for p in stacks[0].get("Parameters", [])}
    # Where `channels` reads the channels document: the stack's own parameters.
    channels = {variable: parameters[name] for name, variable in STACK_CHANNEL_SOURCES.items() if parameters.get(name)}
    return {**{variable: outputs[name] for name, variable in STACK_OUTPUTS.items()}, **channels}


if __name__ == "__main__":
    sys.exit(main())
