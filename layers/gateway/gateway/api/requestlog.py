"""The request log: an account's or a key's requests, newest first, read from the ledger.

Every billed, refunded or failed request leaves one ledger entry (`billing._close`); the log
shows those entries page by page (`GET /api/log/self`, `GET /api/log/token`, admin `logs`).

Reads stay proportional to the page, never to the ledger:

- One access path per request, a key-condition query newest first over the time window: the
  account's entries (the table), one key's (gsi1) or one model's (gsi2). Filters the path does
  not cover (type, a model on the key path, several keys of one name) are DynamoDB filters.
- Page `p` reads the `(p - 1) x page_size` entries before it, so pages reach back at most
  `MAX_EXAMINED` entries (a later `p` is a 400 naming `p`). `data.next_cursor` (also each
  item's `id`) passed back as `cursor` continues right after that entry at the cost of one page.
- One read examines at most `MAX_EXAMINED` entries: a filter that matches little can return a
  short page with `has_more` and a `next_cursor` to go on from.
- `total` is exact when the page read reaches the end of the window; otherwise it is a count
  that examines at most `MAX_EXAMINED` entries of the path (so at most that many; `total_exact`
  says which).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gateway.admission import balances
from gateway.admission.billing import LOG_CONSUME, LOG_ERROR, LOG_REFUND, REFUNDED, SETTLED
from gateway.admission.ledger import LOG_TOPUP
from gateway.auth import Principal
from gateway.errors import InvalidRequest
from gateway.prices import usd_text
from gateway.store.table import user_pk
from gateway.store.usage import LOG_BY_KEY, LOG_BY_MODEL, LOG_BY_USER, UsageRepository, usage_sk
from gateway.validation import integer_param

PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX = 20, 100
MAX_EXAMINED = 1000
TYPES = (LOG_TOPUP, LOG_CONSUME, LOG_ERROR, LOG_REFUND)
_NAME_MAX = 200
MAX_TIMESTAMP = 253402300799  # 9999-12-31T23:59:59Z, the last second an entry's sort key can hold
_POSITION = re.compile(r"USAGE#\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z#[\x21-\x7e]{1,200}")
_TYPE_FILTERS = {
    LOG_TOPUP: "#log_type = :topup",
    LOG_CONSUME: "#outcome = :settled",
    LOG_ERROR: "#log_type = :error",
    # Entries written before the log existed carry no type: their refunds count as type 6.
    LOG_REFUND: "#outcome = :refunded AND (attribute_not_exists(#log_type) OR #log_type = :refund)",
}
# Every attribute a filter names goes through an alias, so no DynamoDB reserved word can bite.
_FILTER_NAMES = {"#outcome": "outcome", "#log_type": "log_type", "#model": "model", "#key_id": "key_id"}
_TYPE_VALUES: dict[int, dict[str, Any]] = {
    LOG_TOPUP: {":topup": LOG_TOPUP}, LOG_CONSUME: {":settled": SETTLED}, LOG_ERROR: {":error": LOG_ERROR},
    LOG_REFUND: {":refunded": REFUNDED, ":refund": LOG_REFUND}}


# --- the query ---------------------------------------------------------------------------------

class PagedQuery:
    """What every paged list of the account takes (the log, the tasks): `p`, `page_size` and a
    window of unix seconds, each checked (a 400 names the parameter); `params` holds the rest,
    blank values dropped."""

    def __init__(self, params: Mapping[str, Any] | None):
        self.params = params = {k: v for k, v in (params or {}).items() if v is not None and str(v).strip() != ""}
        self.page = integer_param(params, "p", 1, 1, None)
        self.page_size = integer_param(params, "page_size", PAGE_SIZE_DEFAULT, 1, PAGE_SIZE_MAX)
        self.start = integer_param(params, "start_timestamp", None, 0, MAX_TIMESTAMP)
        self.end = integer_param(params, "end_timestamp", None, 0, MAX_TIMESTAMP)
        if self.start is not None and self.end is not None and self.start > self.end:
            raise InvalidRequest("start_timestamp: must not be after end_timestamp", param="start_timestamp")


class LogQuery(PagedQuery):
    """The parameters of one log request, each checked (a 400 names the parameter)."""

    def __init__(self, params: Mapping[str, Any] | None):
        super().__init__(params)
        params = self.params
        kind = integer_param(params, "type", 0, 0, None)
        if kind not in (0, *TYPES):
            raise InvalidRequest(
                f"type: must be 1 (top-up), 2 (consume), 5 (error), 6 (refund) or 0 (all); got {kind}", param="type")
        self.type = kind or None
        self.model_name = _name(params, "model_name")
        self.token_name = _name(params, "token_name")
        self.cursor = _cursor(params.get("cursor"))
        self.offset = 0 if self.cursor else (self.page - 1) * self.page_size
        if self.offset + self.page_size > MAX_EXAMINED:
            raise InvalidRequest(
                f"p: pages reach back at most {MAX_EXAMINED} entries (p x page_size); continue from "
                "data.next_cursor with `cursor`, or narrow the window with end_timestamp", param="p")

    @property
    def low(self) -> str:
        return usage_sk(_at(self.start), "") if self.start is not None else "USAGE#"

    @property
    def high(self) -> str:
        if self.end is None:
            return "USAGE#\uffff"
        return usage_sk(_at(self.end).replace(microsecond=999999), "\uffff")  # the whole last second


def _at(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def _name(params: Mapping[str, Any], name: str) -> str | None:
    if name not in params:
        return None
    value = str(params[name])
    if len(value) > _NAME_MAX:
        raise InvalidRequest(f"{name}: must be at most {_NAME_MAX} characters (got {len(value)})", param=name)
    return value


def encode_cursor(sort_key: str) -> str:
    return base64.urlsafe_b64encode(sort_key.encode()).decode("ascii").rstrip("=")


def _cursor(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    try:
        position = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode("ascii")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        position = ""
    if len(text) > 400 or not _POSITION.fullmatch(position):
        raise InvalidRequest("cursor: is not a cursor this log handed out (data.next_cursor or an item's id)",
                             param="cursor")
    return position


# --- reading -----------------------------------------------------------------------------------

def account_log(user_id: int, params: Mapping[str, Any] | None,
                accounts: UsageRepository | None = None) -> dict[str, Any]:
    """GET /api/log/self: every key's entries of the account, in the account envelope."""
    accounts = accounts or UsageRepository()
    query = LogQuery(params)
    names = _key_names(user_id)
    key_ids = None
    if query.token_name is not None:
        key_ids = tuple(key_id for key_id, name in names.items() if name == query.token_name)
    return _envelope(read(user_id, query, key_ids=key_ids, key_names=names, accounts=accounts))


def key_log(principal: Principal, params: Mapping[str, Any] | None,
            accounts: UsageRepository | None = None) -> dict[str, Any]:
    """GET /api/log/token: the calling key's entries only."""
    query = LogQuery(params)
    key_ids = (principal.key_id,) if query.token_name in (None, principal.key_name) else ()
    return _envelope(read(principal.user_id, query, key_ids=key_ids,
                          key_names={principal.key_id: principal.key_name}, accounts=accounts))


def _envelope(data: dict[str, Any]) -> dict[str, Any]:
    return {"success": True, "message": "", "data": data}


def _key_names(user_id: int) -> dict[str, str]:
    return {key["key_id"]: key.get("name", "") for key in balances.list_keys(user_id, include_deleted=True)}


def read(user_id: int, query: LogQuery, *, key_ids: tuple[str, ...] | None = None,
         key_names: Mapping[str, str] | None = None, accounts: UsageRepository | None = None) -> dict[str, Any]:
    """One page of a user's log. `key_ids` None means every key; () means none (an empty page)."""
    accounts = accounts or UsageRepository()
    page: dict[str, Any] = {"items": [], "total": 0, "total_exact": True, "page": query.page,
                            "page_size": query.page_size, "has_more": False, "next_cursor": None}
    if key_ids == ():
        return page
    path, partition, filters, values = _access_path(user_id, query, key_ids)
    filter_expression = " AND ".join(f"({f})" for f in filters) or None
    # DynamoDB refuses an alias the expressions do not use.
    names = {alias: name for alias, name in _FILTER_NAMES.items() if alias in (filter_expression or "")}

    def fetch(limit: int, after: str | None, count_only: bool = False):
        return accounts.log_query(user_id, path, partition, low=query.low, high=query.high, limit=limit,
                                  start_after=after, count_only=count_only, filter_expression=filter_expression,
                                  names=names, values=values)

    start_after = _inside(query.cursor, query.low, query.high)
    if query.cursor and start_after is None and query.cursor <= query.low:
        return page  # the cursor is at or before the window's start: nothing older is in it
    wanted = query.offset + query.page_size + 1  # one more tells whether another page follows
    matches: list[dict[str, Any]] = []
    examined_budget, position, exhausted = MAX_EXAMINED + 1, start_after, False
    while len(matches) < wanted and examined_budget > 0:
        missing = wanted - len(matches)
        limit = min(examined_budget, missing if not filter_expression else max(4 * missing, 50))
        found, _, scanned, position = fetch(limit, position)
        examined_budget -= max(scanned, 1)
        matches.extend(found)
        if position is None:
            exhausted = True
            break
    shown = matches[query.offset:query.offset + query.page_size]
    names_of = key_names or {}
    page["items"] = [_item(entry, names_of) for entry in shown]
    if len(matches) > query.offset + query.page_size:
        page["has_more"], page["next_cursor"] = True, encode_cursor(shown[-1]["sk"])
    elif not exhausted and position is not None:
        # The read stopped at its bound before the page filled: go on from where it stopped.
        page["has_more"], page["next_cursor"] = True, encode_cursor(position)
    if exhausted and not query.cursor:
        page["total"] = len(matches)
    else:
        counted, examined, after = 0, 0, None
        while examined < MAX_EXAMINED:
            _, count, scanned, after = fetch(MAX_EXAMINED - examined, after, count_only=True)
            counted, examined = counted + count, examined + max(scanned, 1)
            if after is None:
                break
        page["total"], page["total_exact"] = counted, after is None
    return page


def _inside(cursor: str | None, low: str, high: str) -> str | None:
    """The cursor as a start position if it lies inside the window; above it, the window's top."""
    if cursor is None or cursor <= low:
        return None
    return cursor if cursor <= high else None


def _access_path(user_id: int, query: LogQuery, key_ids: tuple[str, ...] | None):
    filters: list[str] = []
    values: dict[str, Any] = {}
    if query.type is not None:
        filters.append(_TYPE_FILTERS[query.type])
        values.update(_TYPE_VALUES[query.type])
    if key_ids is not None and len(key_ids) == 1:
        if query.model_name is not None:
            filters.append("#model = :model")
            values[":model"] = query.model_name
        return LOG_BY_KEY, f"KEYLOG#{key_ids[0]}", filters, values
    if key_ids is not None:
        # One token name on several keys: the account's (or the model's) entries of those keys.
        filters.append(f"#key_id IN ({', '.join(f':k{i}' for i in range(len(key_ids)))})")
        values.update({f":k{i}": key_id for i, key_id in enumerate(key_ids[:100])})
    if query.model_name is not None:
        return LOG_BY_MODEL, f"{user_pk(user_id)}#MODEL#{query.model_name}", filters, values
    return LOG_BY_USER, user_pk(user_id), filters, values


# --- an entry as a log item ------------------------------------------------------------------------

def entry_type(entry: Mapping[str, Any]) -> int:
    if entry.get("log_type") in TYPES:
        return int(entry["log_type"])
    return LOG_CONSUME if entry.get("outcome") == SETTLED else LOG_REFUND


def _item(entry: Mapping[str, Any], key_names: Mapping[str, str]) -> dict[str, Any]:
    detail = entry.get("detail") or {}
    created_at = int(entry.get("at", 0)) // 1000
    started_at = int(entry.get("started_at") or 0)
    return {
        "id": encode_cursor(entry["sk"]),
        "created_at": created_at,
        "type": entry_type(entry),
        "model_name": entry.get("model", ""),
        "token_name": key_names.get(entry.get("key_id", ""), ""),
        "quota": int(entry.get("credited_units") or entry.get("units", 0)),
        **dict(zip(("prompt_tokens", "completion_tokens"), tokens_of(detail, entry.get("route", "")), strict=True)),
        "use_time": max(created_at - started_at, 0) if started_at else 0,
        "is_stream": bool(detail.get("stream")),
        "request_id": entry.get("request_id", ""),
        "content": content_of(entry),
        # The caller's group, its price ratio, and the prices before it (`gateway.groups`):
        # quota = base_quota x group_ratio, held_quota = held_base_quota x group_ratio (rounded up).
        "group": entry.get("group", ""),
        "group_ratio": float(entry.get("group_ratio") or 1),
        "base_quota": int(entry["base_units"]) if entry.get("base_units") is not None
        else int(entry.get("credited_units") or entry.get("units", 0)),
        "held_quota": int(entry.get("reserved_units") or 0),
        "held_base_quota": int(entry["reserved_base_units"]) if entry.get("reserved_base_units") is not None
        else int(entry.get("reserved_units") or 0),
    }


def tokens_of(detail: Mapping[str, Any], route: str) -> tuple[int, int]:
    """Tokens in and out as the routes record them: speech's audio tokens are its output, a
    transcription's audio and prompt tokens its input (`api/audio`)."""
    tokens_in, tokens_out = int(detail.get("input_tokens") or 0), int(detail.get("output_tokens") or 0)
    audio = int(detail.get("audio_tokens") or 0)
    if route == "/v1/audio/speech":
        tokens_out += audio
    elif route.startswith("/v1/audio/"):
        tokens_in += audio + int(detail.get("text_tokens") or 0)
    return tokens_in, tokens_out


#: Where an audio request's seconds came from (`api/audio.transcription_bill`'s `usage_source`).
_SECONDS_FROM = {"upstream": "as reported", "duration": "as reported", "file": "read from the file",
                 "size": "the most the file can hold"}


def content_of(entry: Mapping[str, Any]) -> str:
    """A short sentence saying what happened to the request."""
    detail = entry.get("detail") or {}
    route = entry.get("route", "")
    kind = entry_type(entry)
    if kind == LOG_TOPUP:
        name = f" '{detail['name']}'" if detail.get("name") else ""
        credited = int(entry.get('credited_units') or 0)
        if credited < 0:  # a refund or a dispute took a credit back (`commerce.reversals`)
            return f"{route}{name}: {usd_text(-credited)} taken back"[:300]
        return f"{route}{name}: {usd_text(credited)} added"[:300]
    if kind != LOG_CONSUME:
        reason = str(detail.get("reason") or "no reason recorded")
        held = int(entry.get("reserved_units") or 0)
        what = "failed" if kind == LOG_ERROR else "refunded"
        return f"{route} {what}, {usd_text(held)} held and returned: {reason}"[:300]
    parts = [route]
    if "images" in detail:
        parts.append(f"{detail['images']} image(s)")
    if "videos" in detail:
        parts.append(f"task {detail.get('task_id', '')}, {detail['videos']} video(s)")
    # The units of the routes sold otherwise than by tokens (speech, transcriptions, rerank, moderations).
    if "characters" in detail:
        parts.append(f"{int(detail['characters'])} characters")
    if "seconds" in detail:
        source = _SECONDS_FROM.get(str(detail.get("usage_source")))
        parts.append(f"{float(detail['seconds']):g} s of audio" + (f" ({source})" if source else ""))
    if "search_units" in detail:
        parts.append(f"{int(detail.get('documents') or 0)} documents, {int(detail['search_units'])} search unit(s), "
                     f"{int(detail.get('tokens') or 0)} tokens")
    if "inputs" in detail:
        parts.append(f"{int(detail['inputs'])} input(s), {int(detail.get('flagged') or 0)} flagged")
    if any(k in detail for k in ("input_tokens", "output_tokens", "audio_tokens")):
        cached = int(detail.get("cached_input_tokens") or 0)
        tokens_in, tokens_out = tokens_of(detail, route)
        parts.append(f"{tokens_in} tokens in" + (f" ({cached} cached)" if cached else "") + f", {tokens_out} out")
    if detail.get("stream"):
        parts.append("streamed")
    if detail.get("outcome") == "cut":
        parts.append("cut short by the upstream, billed for what was relayed")
    elif detail.get("outcome") == "client_gone":
        parts.append("the client went away, billed for what was relayed")
    return ", ".join(p for p in parts if p)[:300]


# --- the CSV export ----------------------------------------------------------------------------------

#: An export holds at most this many entries (the newest of the window) and spans at most this many days.
EXPORT_MAX_ROWS = 10_000
EXPORT_MAX_DAYS = 93
EXPORT_COLUMNS = ("created_at", "request_id", "type", "model_name", "token_name", "group", "group_ratio",
                  "prompt_tokens", "completion_tokens", "quota", "base_quota", "held_quota", "usd", "is_stream",
                  "use_time", "content")


def export_csv(user_id: int, params: Mapping[str, Any] | None,
               accounts: UsageRepository | None = None) -> tuple[str, bool]:
    """GET /api/log/self/export?start_timestamp=&end_timestamp=: the account's log entries of the
    window (both ends required, at most `EXPORT_MAX_DAYS` apart; `type`, `model_name` and
    `token_name` filter as in the log) as CSV, newest first, at most `EXPORT_MAX_ROWS` of them.
    Answers the text and whether the window held more (the export is then its newest rows)."""
    import csv
    import io

    accounts = accounts or UsageRepository()
    given = {k: v for k, v in (params or {}).items() if k not in ("p", "page_size", "cursor")}
    query = LogQuery(given)
    for name in ("start_timestamp", "end_timestamp"):
        if getattr(query, name.split("_")[0]) is None:
            raise InvalidRequest(f"{name}: required (unix seconds) for an export", param=name)
    assert query.start is not None and query.end is not None
    if query.end - query.start > EXPORT_MAX_DAYS * 86400:
        raise InvalidRequest(f"end_timestamp: an export spans at most {EXPORT_MAX_DAYS} days; export in parts",
                             param="end_timestamp")
    names = _key_names(user_id)
    key_ids = None
    if query.token_name is not None:
        key_ids = tuple(key_id for key_id, name in names.items() if name == query.token_name)
    entries, more = _entries(user_id, query, key_ids, EXPORT_MAX_ROWS, accounts)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")  # RFC 4180
    writer.writerow(EXPORT_COLUMNS)
    for entry in entries:
        item = _item(entry, names)
        item["created_at"] = _at(item["created_at"]).strftime("%Y-%m-%dT%H:%M:%SZ")
        item["usd"] = f"{item['quota'] / 500_000:.6f}"
        writer.writerow([_cell(item.get(column, "")) for column in EXPORT_COLUMNS])
    return out.getvalue(), more


def _entries(user_id: int, query: LogQuery, key_ids: tuple[str, ...] | None, most: int,
             accounts: UsageRepository) -> tuple[list[dict[str, Any]], bool]:
    """The window's entries that pass the query's filters, newest first, at most `most` of them,
    and whether the window held more."""
    entries: list[dict[str, Any]] = []
    if key_ids == ():
        return entries, False
    path, partition, filters, values = _access_path(user_id, query, key_ids)
    filter_expression = " AND ".join(f"({f})" for f in filters) or None
    aliases = {alias: name for alias, name in _FILTER_NAMES.items() if alias in (filter_expression or "")}
    position: str | None = None
    while len(entries) <= most:
        found, _, _, position = accounts.log_query(
            user_id, path, partition, low=query.low, high=query.high, limit=most + 1 - len(entries),
            start_after=position, filter_expression=filter_expression, names=aliases, values=values)
        entries.extend(found)
        if position is None:
            break
    return entries[:most], len(entries) > most


#: The most entries one `/api/log/self/stat` adds up (as many as an export holds).
STAT_MAX_ENTRIES = EXPORT_MAX_ROWS


def log_stat(user_id: int, params: Mapping[str, Any] | None,
             accounts: UsageRepository | None = None) -> dict[str, Any]:
    """GET /api/log/self/stat (new-api's route; its `quota` the spend of the filtered rows): the
    totals of the entries the log's filters select: `requests` (entries other than top-ups),
    `quota` (units spent: the consume entries'), `prompt_tokens`, `completion_tokens`, and
    `exact` false when the window held more than `STAT_MAX_ENTRIES` (the totals are then the newest
    ones')."""
    query = LogQuery({k: v for k, v in (params or {}).items() if k not in ("p", "page_size", "cursor")})
    names = _key_names(user_id)
    key_ids = None
    if query.token_name is not None:
        key_ids = tuple(key_id for key_id, name in names.items() if name == query.token_name)
    entries, more = _entries(user_id, query, key_ids, STAT_MAX_ENTRIES, accounts or UsageRepository())
    totals = {"requests": 0, "quota": 0, "prompt_tokens": 0, "completion_tokens": 0, "exact": not more}
    for entry in entries:
        item = _item(entry, names)
        if item["type"] == LOG_TOPUP:
            continue
        totals["requests"] += 1
        totals["quota"] += item["quota"] if item["type"] == LOG_CONSUME else 0
        totals["prompt_tokens"] += item["prompt_tokens"]
        totals["completion_tokens"] += item["completion_tokens"]
    return _envelope(totals)


def _cell(value: Any) -> str:
    """A CSV cell a spreadsheet shows as text: one starting with = + - @ (or their full-width
    forms), or with any space or control character (tab, CR, LF, VT, FF, a space: spreadsheets
    skip them and evaluate what follows), is quoted with a leading apostrophe, so a model or key
    name never runs as a formula (OWASP's CSV injection advice); a plain number stays a number."""
    text = str(value).lower() if isinstance(value, bool) else str(value)
    if text and (text[0] in _FORMULA_STARTS or text[0].isspace() or not text[0].isprintable()) \
            and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


_FORMULA_STARTS = "=+-@\uff1d\uff0b\uff0d\uff20"


_NUMBER = re.compile(r"-?[0-9]+(\.[0-9]+)?")
