"""Admin command line: users, keys, quotas and usage, against whatever DynamoDB
`AWS_ENDPOINT_URL` points to (the local emulator, DynamoDB Local, or real AWS when unset).

    python -m gateway.admin create-user --username alice --quota-usd 20
    python -m gateway.admin issue-key --user 2 --name laptop [--quota-usd 5] [--expires-in-days 30] [--models m-small,m-large]
    python -m gateway.admin list-keys --user 2
    python -m gateway.admin revoke-key <key id>
    python -m gateway.admin add-quota --user 2 --usd 10        (or --key <key id>, or --units N)
    python -m gateway.admin set-access-token --user 2          (prints a new system access token)
    python -m gateway.admin usage --user 2 [--start 2026-11-01] [--end 2026-11-30] [--key <key id> | --model <model>]

The accounts table is `ACCOUNTS_TABLE` (the stack output `AccountsTableName` when deployed).
Every command prints one JSON object. A key and an access token are printed once, when made.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from decimal import Decimal, InvalidOperation
from typing import Any, Sequence

from gateway import keys
from gateway.account import parse_date
from gateway.errors import GatewayError
from gateway.prices import UNITS_PER_USD, usd_to_units
from gateway.store.accounts import AccountsRepository, KeyNotFound, UserNotFound


def ensure_demo_account(*, user_id: int, key: str, quota: int, access_token: str,
                        accounts: AccountsRepository | None = None) -> None:
    """The local demo user, its system access token and an unlimited key (its quota is the user's)."""
    accounts = accounts or AccountsRepository()
    if accounts.get_user(user_id, consistent=True) is None:
        accounts.create_user(username="demo", display_name="Demo user", email="demo@example.com",
                             role=1, quota=quota, user_id=user_id)
    accounts.set_access_token(user_id, access_token)
    if accounts.get_key(keys.hash_secret(key)) is None:
        accounts.create_key(user_id, name="demo", key=key)


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
    return {name: record.get(name) for name in (
        "key_id", "user_id", "name", "status", "unlimited", "remain_quota", "used_quota", "expires_at",
        "allowed_models", "created_at", "last_used_at")}


def run(argv: Sequence[str], accounts: AccountsRepository | None = None) -> dict[str, Any]:
    args = _parser().parse_args(argv)
    accounts = accounts or AccountsRepository()
    if args.command == "create-user":
        token = keys.new_secret()
        user = accounts.create_user(username=args.username, email=args.email or "", quota=_units(args) or 0,
                                    user_id=args.id, role=args.role, access_token=token)
        return {"user_id": user["id"], "username": user["username"], "quota": user["quota"],
                "access_token": token}
    if args.command == "issue-key":
        expires_at = args.expires_at or (int(time.time()) + args.expires_in_days * 86400 if args.expires_in_days else 0)
        models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else None
        secret, record = accounts.create_key(args.user, name=args.name, quota=_units(args),
                                             expires_at=expires_at, allowed_models=models)
        return {"key": secret, **_key_view(record)}
    if args.command == "list-keys":
        return {"user_id": args.user, "keys": [_key_view(k) for k in accounts.list_keys(args.user)]}
    if args.command == "revoke-key":
        accounts.revoke_key(args.key_id)
        return {"key_id": args.key_id, "status": "revoked"}
    if args.command == "add-quota":
        units = _units(args)
        if args.key:
            return {"key_id": args.key, "remain_quota": accounts.add_key_quota(args.key, units)}
        return {"user_id": args.user, "quota": accounts.add_user_quota(args.user, units)}
    if args.command == "set-access-token":
        token = args.token or keys.new_secret()
        accounts.set_access_token(args.user, token)
        return {"user_id": args.user, "access_token": token}
    if args.command == "usage":
        user = accounts.get_user(args.user, consistent=True)
        if user is None:
            raise UserNotFound(args.user)
        total = accounts.usage(args.user, start=parse_date("start", args.start), end=parse_date("end", args.end),
                               key_id=args.key, model=args.model)
        return {"user_id": args.user, "requests": total.requests, "units": total.units,
                "usd": str(Decimal(total.units) / UNITS_PER_USD), "quota_left": user["quota"],
                "used_quota": user["used_quota"], "request_count": user["request_count"]}
    raise AssertionError(args.command)  # argparse only lets known commands through


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
    p.add_argument("--expires-in-days", type=int, default=0)
    p.add_argument("--models", help="comma-separated allowlist (default: every model)")

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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        result = run(sys.argv[1:] if argv is None else argv)
    except (UserNotFound, KeyNotFound) as exc:
        print(json.dumps({"error": f"not found: {exc.__class__.__name__} {exc}"}), file=sys.stderr)
        return 1
    except (ValueError, GatewayError) as exc:
        print(json.dumps({"error": str(exc)}), file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
