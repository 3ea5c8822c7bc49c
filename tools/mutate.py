"""`make mutate`: mutation testing of the money and state modules with cosmic-ray.

Each module below is mutated by cosmic-ray's operators (one session per module, in a scratch copy
of the tree under .mutate/, never the checkout), and each mutant is run against the tests that
cover that module only (`-x`: the first failure kills it). Where a module has more mutants than
its share, a seeded random sample of them runs (the rest are marked skipped in the session), so
each module stays within about 20 minutes on 2 cores. It ends with one line per module, then one
line for the whole run (the last, for scripts):

    mutation[<module>]: killed=<n> survived=<n> timeout=<n>
    mutation: killed=<n> survived=<n> timeout=<n>

A survivor is printed with its diff: kill it with a test, or list it in docs/DEVELOPING.md
("Mutation testing") with why it is equivalent. Settings (environment): MUTATE_SEED (default 25;
several, comma-separated, run each module once per seed, each in its own copy of the tree, the
lines then named `mutation[<module>@<seed>]`), MUTATE_SAMPLE (mutants per module, default 24;
MUTATE_SAMPLE_SLOW, default 20, for those whose tests start the AWS emulator), MUTATE_JOBS
(modules run side by side, default 2), MUTATE_MODULES (comma-separated names below, to run some
only).
"""

from __future__ import annotations

import ast
import os
import random
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutate"
LAYER = "layers/gateway/gateway"

# The tests that covered billing, the leases and the accounts table before each was split by
# concept: each module split from one keeps its tests (`MODULES`).
BILLING_TESTS = [
    "tests/integration/test_billing.py", "tests/integration/test_billing_conflicts.py",
    # the sweeper's refunds counted for their alarm
    "tests/integration/test_operations.py::test_a_stale_hold_refund_is_counted_for_its_alarm",
    # a task's close giving its budget windows back (`_close`'s `limit_budgets`)
    "tests/integration/test_limits.py::test_a_tasks_durable_reservation_holds_on_the_budget_and_its_close_gives_back"]
LEASES_TESTS = [
    "tests/integration/test_money_model.py", "tests/integration/test_billing.py", "tests/integration/test_metering.py",
    # a close's writes while DynamoDB throttles, fails or loses answers
    "tests/integration/test_store_faults.py"]
ACCOUNTS_TESTS = [
    "tests/integration/test_account.py", "tests/integration/test_usage_totals.py",
    "tests/integration/test_admin.py", "tests/integration/test_tokens.py",
    "tests/integration/test_request_log.py",  # `log_query`: the request log across ledger shards
    "tests/integration/test_sign_in.py"]  # `admit_sign_in`: the sign-in counters' rules

# name: (module path, the tests that cover it). Billing is the module the "money at scale"
# rebuild replaces: the module that replaces it takes its line here.
MODULES: dict[str, tuple[str, list[str]]] = {  # the slowest first: two run side by side
    "engine": (f"{LAYER}/tasks/engine.py", [
        "tests/integration/test_task_faults.py",  # and a parked task's claim given back when its hold is refused,
        "tests/integration/test_imgtask.py::test_a_modal_refused_for_quota_waits_again_and_two_completions_never_both_run",
        # a callback for each change of a task's status, none for a poll that changed nothing
        "tests/integration/test_alpha.py::test_a_callback_follows_every_status_change_with_the_upstreams_payload_signed",
        # a task settles at the price it was held at, whatever the operator's prices say by then
        "tests/integration/test_model_prices.py::test_a_task_settles_at_the_price_it_was_held_at"]),
    "billing": (f"{LAYER}/admission/billing.py", BILLING_TESTS),
    # The one way a money transaction is sent (asked again on a conflict, a 429 once it never clears),
    # moved out of billing: billing's tests.
    "transactions": (f"{LAYER}/admission/transactions.py", BILLING_TESTS),
    # The quota leases every synchronous request is held against (the "money at scale" design): the
    # pool and its holds, the closes (a group commit per lease), the folds and the sweeper's part.
    "leases": (f"{LAYER}/admission/leases.py", LEASES_TESTS),
    "lease_closes": (f"{LAYER}/admission/lease_closes.py", LEASES_TESTS),
    "lease_folds": (f"{LAYER}/admission/lease_folds.py", LEASES_TESTS),
    # The account as its user sees it (open leases added): the leases' readers and the accounts' reads.
    "balances": (f"{LAYER}/admission/balances.py", LEASES_TESTS + ACCOUNTS_TESTS),
    # Rate limits and budgets: counters that admit or refuse, and the budget a close gives back to;
    # the limits themselves, a plain value.
    "limits": (f"{LAYER}/admission/limits.py", ["tests/integration/test_limits.py"]),
    "limit_values": (f"{LAYER}/limit_values.py", ["tests/integration/test_limits.py"]),
    # Idempotent submits: a retry is never billed twice.
    "idempotency": (f"{LAYER}/admission/idempotency.py", ["tests/integration/test_idempotency.py"]),
    # The tasks table: every change conditioned on the task's version (a task is finished once).
    "tasks_store": (f"{LAYER}/store/tasks.py", ["tests/integration/test_tasks_store.py"]),
    # The credits of people's money (commerce): the one exactly-once credit, codes, card payments
    # with the invitation reward, and sign-up's codes and limits.
    "credits": (f"{LAYER}/commerce/credits.py", [
        "tests/integration/test_commerce.py::test_a_user_redeems_a_code_once_and_sees_it_in_the_log_not_in_spend",
        "tests/integration/test_payments.py", "tests/integration/test_credits.py"]),
    "redemption": (f"{LAYER}/commerce/redemption.py", ["tests/integration/test_commerce.py",
                                                       "tests/integration/test_credits.py"]),
    "payments": (f"{LAYER}/commerce/payments.py", ["tests/integration/test_payments.py"]),
    # What a refund or a dispute takes back, once, in any order (issue 43).
    "reversals": (f"{LAYER}/commerce/reversals.py", [
        f"tests/integration/test_payments.py::{name}" for name in (
            "test_a_refund_takes_back_what_it_refunds_once",
            "test_a_refund_of_what_was_spent_is_owed_and_holds_the_account_at_zero_until_repaid",
            "test_a_dispute_freezes_the_credit_until_it_closes",
            "test_a_dispute_won_while_the_account_owes_repays_the_debt_first",
            "test_a_reversal_before_its_payment_is_credited_is_refused_until_it_is",
            "test_a_refund_meeting_another_between_its_read_and_its_write_reads_again_and_takes_back_once",
            "test_randomized_credits_refunds_disputes_and_spending_leave_each_orders_net_credit_exact")]),
    "signup": (f"{LAYER}/commerce/signup.py", ["tests/integration/test_signup.py"]),
    # The invitation reward moved into quota (aff_transfer): one conditional credit.
    "invitations": (f"{LAYER}/commerce/invitations.py", ["tests/integration/test_payments.py",
                                                         "tests/integration/test_signup.py"]),
    # The accounts table's rooms: users' and keys' quota (credits by an operator, key limits), the
    # keys of every item the money modules write (holds), the usage reads' day totals, sign-in.
    "table_store": (f"{LAYER}/store/table.py", ACCOUNTS_TESTS),
    # the users' room: each refusal of a new user told apart, codes, credits, disabling (its own file first)
    "users_store": (f"{LAYER}/store/users.py", ["tests/integration/test_users_store.py", *ACCOUNTS_TESTS]),
    # the keys' room: issued once (a lost answer its own success), a new key's record, remains, reads
    "keys_store": (f"{LAYER}/store/keys.py", ["tests/integration/test_keys_store.py", *ACCOUNTS_TESTS]),
    # the sign-in room: session generations, the decoy, counters refused together (its own file first)
    "signin_store": (f"{LAYER}/store/signin.py", ["tests/integration/test_signin_store.py", *ACCOUNTS_TESTS]),
    "usage_store": (f"{LAYER}/store/usage.py", ACCOUNTS_TESTS),
    "holds_store": (f"{LAYER}/store/holds.py", LEASES_TESTS + ACCOUNTS_TESTS),
    "prices": (f"{LAYER}/prices.py", ["tests/unit/test_prices.py", "tests/unit/test_groups.py",  # with_ratio
                                      "tests/unit/text/test_relay.py"]),
    "usage": (f"{LAYER}/formats/usage.py", ["tests/unit/formats/test_usage.py", "tests/unit/formats/test_responses.py",
                                            "tests/unit/formats/test_streams.py"]),
    "verdict": (f"{LAYER}/upstreams/verdict.py", ["tests/unit/test_verdict.py", "tests/unit/test_upstream_errors.py",
                                                  "tests/unit/test_channels.py"]),
    # What a failed attempt does to its channel, and the failover walk (once verdict's second half).
    "failover": (f"{LAYER}/routing/failover.py", ["tests/unit/test_verdict.py", "tests/unit/test_upstream_errors.py",
                                                  "tests/unit/test_channels.py"]),
}


# Mutants per module where it differs from MUTATE_SAMPLE: the modules whose covering tests start
# the AWS emulator take longer per mutant, so fewer of theirs fit in the time.
SAMPLES = {"billing": int(os.environ.get("MUTATE_SAMPLE_SLOW", "20")),
           "limits": int(os.environ.get("MUTATE_SAMPLE_SLOW", "20")),
           "idempotency": int(os.environ.get("MUTATE_SAMPLE_SLOW", "20")),
           "tasks_store": int(os.environ.get("MUTATE_SAMPLE_SLOW", "20")),
           "leases": int(os.environ.get("MUTATE_SAMPLE_SLOW", "20")),
           "transactions": int(os.environ.get("MUTATE_SAMPLE_SLOW", "20")),
           "engine": int(os.environ.get("MUTATE_SAMPLE_SLOW", "20")),
           **{name: int(os.environ.get("MUTATE_SAMPLE_SLOW", "20"))
              for name in ("credits", "redemption", "payments", "reversals", "signup", "invitations", "lease_closes",
                           "lease_folds", "balances", "limit_values", "table_store", "users_store", "keys_store",
                           "signin_store", "usage_store", "holds_store")}}


def _copy_tree(dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(
        ".git", ".venv*", ".mutate", ".local", ".pytest_cache", "__pycache__", ".work", "node_modules"))


Span = tuple[tuple[int, int], tuple[int, int]]


def _never_run(module: Path) -> list[Span]:
    """The source spans Python never evaluates in a module that postpones its annotations: every
    annotation, and each function's bare `*` (cosmic-ray reads it as a multiplication)."""
    tree = ast.parse(module.read_text())
    if not any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
               and any(alias.name == "annotations" for alias in node.names) for node in tree.body):
        return []
    spans: list[Span] = []

    def add(node: ast.AST | None) -> None:
        if node is not None:
            spans.append(((node.lineno, node.col_offset), (node.end_lineno or node.lineno, node.end_col_offset or 0)))

    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign):
            add(node.annotation)
        elif isinstance(node, ast.arg):
            add(node.annotation)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            add(node.returns)
            if node.args.kwonlyargs and node.args.vararg is None:  # the bare `*` before keyword-only ones
                first = node.args.kwonlyargs[0]
                # after the last positional parameter, its default included
                before: ast.AST | None = (node.args.defaults or node.args.args or [None])[-1]
                start = (before.end_lineno or 0, before.end_col_offset or 0) if before is not None \
                    else (node.lineno, node.col_offset)
                spans.append((start, (first.lineno, first.col_offset)))
    return spans


def _inside(position: tuple[int, int], spans: list[Span]) -> bool:
    return any(start <= tuple(position) < end for start, end in spans)


def _pytest(tests: list[str]) -> str:
    return " ".join([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                     *tests])


class BaselineFailed(Exception):
    """A module's covering tests fail on the unmutated tree: its mutants would all look killed."""


def _run_module(name: str, path: str, tests: list[str], sample: int, seed: int) -> dict[str, int]:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome, WorkResult

    tree = WORK / f"{name}-{seed}"
    _copy_tree(tree)
    command = _pytest(tests)
    # The baseline: the covering tests pass on the unmutated copy, and how long they take.
    started = time.monotonic()
    baseline = subprocess.run(command.split(), cwd=tree, capture_output=True, text=True)
    took = time.monotonic() - started
    if baseline.returncode != 0:  # said at once: the other modules go on, the run fails at its end
        print(f"{name}@{seed}: the covering tests fail without any mutation:\n{baseline.stdout[-3000:]}", flush=True)
        raise BaselineFailed(name)
    timeout = max(30.0, 4 * took)
    config = tree / "cosmic-ray.toml"
    config.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{path}"\n'
        f"timeout = {timeout:.0f}\n"
        "excluded-modules = []\n"
        f'test-command = "{command}"\n\n'
        "[cosmic-ray.distributor]\n"
        'name = "local"\n')
    session = tree / "session.sqlite"
    cosmic = str(Path(sys.executable).with_name("cosmic-ray"))
    subprocess.run([cosmic, "init", str(config), str(session)], cwd=tree, check=True)
    inert = _never_run(tree / path)
    with use_db(str(session), WorkDB.Mode.open) as db:
        # In source order (job ids are random): the same seed samples the same mutants every run.
        items = sorted(db.work_items, key=lambda item: [(m.start_pos, m.operator_name, m.occurrence)
                                                        for m in item.mutations])
        # Equivalent by construction: a mutation inside a type annotation (never evaluated: the
        # layer's modules use `from __future__ import annotations`) or of a signature's bare `*`.
        equivalent = [i.job_id for i in items if any(_inside(m.start_pos, inert) for m in i.mutations)]
        live = [i.job_id for i in items if i.job_id not in set(equivalent)]
        chosen = set(random.Random(f"{seed}:{name}").sample(live, min(sample, len(live))))
        if equivalent:
            db.set_multiple_results(equivalent, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                                           output="equivalent: a type annotation"))
        skipped = [job for job in live if job not in chosen]
        if skipped:
            db.set_multiple_results(skipped, WorkResult(worker_outcome=WorkerOutcome.SKIPPED,
                                                        output="not in this run's sample"))
    print(f"{name}: {len(chosen)} of {len(live)} mutants (seed {seed}; {len(equivalent)} more in annotations "
          f"left out), {timeout:.0f} s timeout, baseline {took:.1f} s: {' '.join(tests)}", flush=True)
    subprocess.run([cosmic, "exec", str(config), str(session)], cwd=tree, check=True)
    counts = {"killed": 0, "survived": 0, "timeout": 0, "incompetent": 0}
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome == WorkerOutcome.SKIPPED:
                continue
            if result.test_outcome == TestOutcome.KILLED and result.output == "timeout":
                counts["timeout"] += 1
            elif result.test_outcome == TestOutcome.SURVIVED:
                counts["survived"] += 1
                mutation = item.mutations[0]
                print(f"SURVIVED {name}@{seed} {mutation.module_path}:{mutation.start_pos[0]} {mutation.operator_name} "
                      f"#{mutation.occurrence}\n{result.diff}", flush=True)
            elif result.test_outcome == TestOutcome.KILLED:
                counts["killed"] += 1
            else:  # the mutant could not even be tested (it broke the import): as good as killed
                counts["incompetent"] += 1
    print(f"{name}@{seed}: {counts}", flush=True)
    return counts


def main() -> None:
    seeds = [int(s) for s in os.environ.get("MUTATE_SEED", "25").split(",") if s.strip()]
    sample = int(os.environ.get("MUTATE_SAMPLE", "24"))
    names = [n.strip() for n in os.environ.get("MUTATE_MODULES", ",".join(MODULES)).split(",") if n.strip()]
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        sys.exit(f"unknown module(s) {', '.join(unknown)}; known: {', '.join(MODULES)}")
    started = time.monotonic()
    totals = {"killed": 0, "survived": 0, "timeout": 0, "incompetent": 0}
    # Modules side by side, one per core: each session mutates its own copy of the tree.
    with ThreadPoolExecutor(max_workers=int(os.environ.get("MUTATE_JOBS", "2"))) as pool:
        runs = {(f"{name}@{seed}" if len(seeds) > 1 else name):
                pool.submit(_run_module, name, *MODULES[name], SAMPLES.get(name, sample), seed)
                for name in names for seed in seeds}
        counts: dict[str, dict[str, int]] = {}
        failed: list[str] = []
        for name, run in runs.items():
            try:
                counts[name] = run.result()
            except BaselineFailed:
                failed.append(name)
    for result in counts.values():
        for key, value in result.items():
            totals[key] += value
    print(f"mutation run: {time.monotonic() - started:.0f} s; {totals['incompetent']} incompetent mutants "
          "(they broke the import) counted as killed")
    # Where the survivors are, module by module, then the whole run's line (the last, for scripts).
    for name, result in counts.items():
        print(f"mutation[{name}]: {_line(result)}")
    for name in failed:
        print(f"mutation[{name}]: not run (its covering tests fail unmutated)")
    print(f"mutation: {_line(totals)}")
    if failed:
        sys.exit(1)


def _line(counts: dict[str, int]) -> str:
    """`killed=… survived=… timeout=…`: a mutant that broke the import counts as killed."""
    return (f"killed={counts['killed'] + counts['incompetent']} survived={counts['survived']} "
            f"timeout={counts['timeout']}")


if __name__ == "__main__":
    main()
