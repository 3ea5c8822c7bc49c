// The operator's commerce pages: redemption codes (/api/redemption/), everyone's orders
// (GET /api/user/topup) and the site settings (GET/PUT /api/option/, with each option's own
// description). Every rule is the API's: a refused value comes back as its message.
import { useState } from "preact/hooks";
import { call, UNITS_PER_USD, usd, when } from "./api.js";
import { Field, FormError, matches, Pager, Search } from "./ui.jsx";
import { useLoad } from "./user.jsx";

const CODE_STATUS = { 1: "enabled", 2: "disabled", 3: "used" };
const ORDER_STATUS = { pending: "pending", success: "paid", expired: "expired" };

function NewCodes({ onMade }) {
  const [error, setError] = useState(null);
  const [made, setMade] = useState(null);
  const [copied, setCopied] = useState(false);
  async function submit(event) {
    event.preventDefault();
    const form = event.currentTarget;
    const f = new FormData(form);
    const expiry = String(f.get("expired_time") || "");
    const body = {
      name: String(f.get("name") || ""), quota: Math.round(Number(f.get("usd") || 0) * UNITS_PER_USD),
      count: Number(f.get("count") || 1),
      expired_time: expiry ? Math.floor(Date.parse(expiry + "T23:59:59Z") / 1000) : 0,
    };
    setError(null);
    setCopied(false);
    try {
      const answer = await call("POST", "/api/redemption/", { body });
      setMade({ name: body.name, keys: answer.data });
      form.reset();
      onMade();
    } catch (err) {
      setError(err);
    }
  }
  async function copy() {
    await navigator.clipboard.writeText(made.keys.join("\n"));
    setCopied(true);
  }
  return (
    <>
      {made && (
        <section class="card secret" aria-label="New codes">
          <p>{made.keys.length} new code{made.keys.length === 1 ? "" : "s"} <strong>{made.name}</strong>. Copy them
            and hand them out: each adds its quota to the first account that redeems it.</p>
          <code aria-label="The new codes" class="codes">{made.keys.join("\n")}</code>
          <div class="row">
            <button type="button" onClick={copy}>Copy</button>
            <button type="button" onClick={() => setMade(null)}>Done</button>
            {copied && <span role="status">Copied.</span>}
          </div>
        </section>
      )}
      <form class="card" onSubmit={submit} aria-label="Create codes">
        <h2>Create codes</h2>
        <Field label="Name" name="name" required error={error} autocomplete="off" />
        <Field label="Quota per code (USD)" name="usd" type="number" min="0" step="0.01" required error={error} />
        <Field label="How many" name="count" type="number" min="1" step="1" defaultValue="1" error={error} />
        <Field label="Expires on (UTC; empty: never)" name="expired_time" type="date" error={error} />
        <FormError error={error} fields={["name", "count", "expired_time"]} />
        <button type="submit">Create codes</button>
      </form>
    </>
  );
}

export function Codes() {
  const [page, setPage] = useState(1);
  const [tick, setTick] = useState(0);
  const [error, setError] = useState(null);
  const { data, error: loadError } = useLoad(() => call("GET", "/api/redemption/", { query: { p: page, page_size: 20 } }),
    [page, tick]);
  async function act(promise) {
    setError(null);
    try {
      await promise();
      setTick((n) => n + 1);
    } catch (err) {
      setError(err);
    }
  }
  const [query, setQuery] = useState("");
  const items = ((data && data.data.items) || []).filter((c) => matches(query, c.name || "", c.key || "",
    String(c.used_user_id || "")));
  return (
    <>
      <NewCodes onMade={() => setTick((n) => n + 1)} />
      {(error || loadError) && <p class="error" role="alert">{(error || loadError).message}</p>}
      <Search label="Search codes on this page" value={query} onInput={setQuery} />
      <div class="table">
        <table aria-label="Redemption codes">
          <thead><tr><th>Id</th><th>Name</th><th>Code</th><th>Quota</th><th>Status</th><th>Created</th><th>Expires</th><th>Redeemed</th><th>Actions</th></tr></thead>
          <tbody>
            {items.map((c) => (
              <tr key={c.id}>
                <td>{c.id}</td><td>{c.name}</td><td><code>{c.key}</code></td><td>{usd(c.quota)}</td>
                <td>{CODE_STATUS[c.status] || c.status}</td><td>{when(c.created_time)}</td><td>{when(c.expired_time)}</td>
                <td>{c.status === 3 ? `by user #${c.used_user_id}, ${when(c.redeemed_time)}` : ""}</td>
                <td><div class="actions">
                  {c.status !== 3 && (
                    <button type="button" aria-label={`${c.status === 1 ? "Disable" : "Enable"} code ${c.id}`}
                      onClick={() => act(() => call("PUT", "/api/redemption/", { query: { status_only: "true" },
                        body: { id: c.id, status: c.status === 1 ? 2 : 1 } }))}>
                      {c.status === 1 ? "Disable" : "Enable"}
                    </button>
                  )}
                  <button type="button" class="danger" aria-label={`Delete code ${c.id}`}
                    onClick={() => act(() => call("DELETE", `/api/redemption/${c.id}`))}>Delete</button>
                </div></td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {data && !items.length && <p>No codes yet.</p>}
      <Pager hasPrevious={page > 1} hasNext={Boolean(data && data.data.has_more)} onFirst={() => setPage(1)}
        onNext={() => setPage(page + 1)} />
    </>
  );
}

// The users' names by id, for the pages that list ids (the first 100 users; others show their id).
export function useUserNames() {
  const { data } = useLoad(() => call("GET", "/api/admin/users", { query: { page_size: 100 } }), []);
  const names = {};
  for (const user of (data && data.data.items) || []) names[user.id] = user.username;
  return (id) => (names[id] ? `${names[id]} (#${id})` : `#${id}`);
}

export function AllOrders() {
  const [page, setPage] = useState(1);
  const [tick, setTick] = useState(0);
  const nameOf = useUserNames();
  const { data, error } = useLoad(() => call("GET", "/api/user/topup", { query: { p: page, page_size: 20 } }),
    [page, tick]);
  const items = (data && data.data.items) || [];
  return (
    <>
      <button type="button" onClick={() => setTick((n) => n + 1)}>Refresh</button>
      {error && <p class="error" role="alert">{error.message}</p>}
      <div class="table">
        <table aria-label="Orders">
          <thead><tr><th>Order</th><th>User</th><th>Created</th><th>Amount</th><th>Charged</th><th>Quota</th><th>Method</th><th>Status</th><th>Paid</th></tr></thead>
          <tbody>
            {items.map((o) => (
              <tr key={o.trade_no}>
                <td><code>{o.trade_no}</code></td><td>{nameOf(o.user_id)}</td><td>{when(o.created_at)}</td><td>{o.amount} USD</td>
                <td>{(o.money_cents / 100).toFixed(2)} {String(o.currency || "").toUpperCase()}</td>
                <td>{usd(o.units)}</td><td>{o.payment_method}</td><td>{ORDER_STATUS[o.status] || o.status}</td>
                <td>{when(o.paid_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {data && !items.length && <p>No orders yet.</p>}
      <Pager hasPrevious={page > 1} hasNext={Boolean(data && data.data.has_more)} onFirst={() => setPage(1)}
        onNext={() => setPage(page + 1)} />
    </>
  );
}

// Site settings as new-api groups them, each option named in words (its key beside it for
// scripts), quotas shown and entered in USD (stored in units, 500000 per USD), JSON in an editor
// that checks the text parses before it is sent (the API then checks what it means).
const GROUPS = [
  ["Site", ["SystemName", "Notice"]],
  ["Sign-up", ["RegisterEnabled", "PasswordRegisterEnabled", "EmailVerificationEnabled", "QuotaForNewUser",
    "CriticalRateLimitNum", "CriticalRateLimitDurationSeconds"]],
  ["Invitations", ["QuotaForInviter", "QuotaForInvitee"]],
  ["Payments", ["StripeUnitPrice", "StripeMinTopUp", "TopUpRateLimitNum", "TopUpRateLimitDurationSeconds"]],
  ["Prices", ["PricingAnonymous", "GroupRatio", "ModelPrice"]],
];
const LABELS = {
  SystemName: "Site name", Notice: "Notice", RegisterEnabled: "Anyone may sign up",
  PasswordRegisterEnabled: "Sign-up with a password", EmailVerificationEnabled: "Sign-up needs an emailed code",
  QuotaForNewUser: "Quota a new user starts with (USD)",
  CriticalRateLimitNum: "Sign-up, code and reset requests per window",
  CriticalRateLimitDurationSeconds: "Sign-up window (seconds)",
  QuotaForInviter: "Reward to the inviter at an invitee's first payment (USD)",
  QuotaForInvitee: "Quota an invitee starts with (USD)", StripeUnitPrice: "Price of 1 USD of quota",
  StripeMinTopUp: "Smallest card top-up (USD)", TopUpRateLimitNum: "Card orders per user and address per window",
  TopUpRateLimitDurationSeconds: "Card order window (seconds)", PricingAnonymous: "Pricing page open to visitors",
  GroupRatio: "Group price ratios (JSON)", ModelPrice: "Model prices (JSON)",
};
const QUOTAS = new Set(["QuotaForNewUser", "QuotaForInviter", "QuotaForInvitee"]);
const JSON_OPTIONS = new Set(["GroupRatio", "ModelPrice"]);

function shownValue(option) {
  if (QUOTAS.has(option.key)) return String(Number(option.value || 0) / UNITS_PER_USD);
  if (JSON_OPTIONS.has(option.key)) {
    try {
      return JSON.stringify(JSON.parse(option.value || "{}"), null, 2);
    } catch {
      return option.value;
    }
  }
  return option.value;
}

function OptionRow({ option }) {
  const [value, setValue] = useState(shownValue(option));
  const [error, setError] = useState(null);
  const [saved, setSaved] = useState(false);
  const id = `option-${option.key}`;
  const label = LABELS[option.key] || option.key;
  const yesNo = option.value === "true" || option.value === "false";
  const quota = QUOTAS.has(option.key);
  const json = JSON_OPTIONS.has(option.key);
  async function submit(event) {
    event.preventDefault();
    setError(null);
    setSaved(false);
    let sent = value;
    if (quota) {
      const usdValue = Number(String(value).trim());
      if (String(value).trim() === "" || !Number.isFinite(usdValue) || usdValue < 0) {
        setError(new Error("Enter an amount in USD, 0 or more"));
        return;
      }
      sent = String(Math.round(usdValue * UNITS_PER_USD));
    }
    if (json) {
      try {
        JSON.parse(value);
      } catch (err) {
        setError(new Error(`Not valid JSON, nothing saved: ${err.message}`));
        return;
      }
    }
    try {
      await call("PUT", "/api/option/", { body: { key: option.key, value: sent } });
      setSaved(true);
    } catch (err) {
      setError(err);
    }
  }
  const described = `${id}-about${error ? ` ${id}-error` : ""}`;
  const change = (e) => { setValue(e.currentTarget.value); setSaved(false); };
  return (
    <form class="option" onSubmit={submit} aria-label={label}>
      <label for={id}>{label}</label> <code class="units">{option.key}</code>
      <p class="note" id={`${id}-about`}>{option.description}
        {quota && ` (stored as ${Number(option.value || 0).toLocaleString("en-US")} units; 500,000 units = $1)`}</p>
      <div class="row">
        {yesNo ? (
          <select id={id} name="value" value={value} aria-describedby={described} onChange={change}>
            <option value="true">on</option><option value="false">off</option>
          </select>
        ) : json ? (
          <textarea id={id} name="value" rows={8} spellcheck={false} value={value} aria-describedby={described}
            aria-invalid={error ? "true" : undefined} onInput={change} />
        ) : (
          <input id={id} name="value" value={value} aria-describedby={described} inputMode={quota ? "decimal" : undefined}
            aria-invalid={error ? "true" : undefined} onInput={change} />
        )}
        <button type="submit" aria-label={`Save ${label}`}>Save</button>
        {saved && <span role="status">Saved.</span>}
      </div>
      {error && <p class="error" id={`${id}-error`} role="alert">{error.message}</p>}
    </form>
  );
}

export function Settings() {
  const { data, error } = useLoad(() => call("GET", "/api/option/"), []);
  const options = (data && data.data) || [];
  const grouped = new Set(GROUPS.flatMap(([, keys]) => keys));
  const rest = options.filter((o) => !grouped.has(o.key));
  return (
    <>
      <p class="note">Every instance reads a changed setting within the key cache's seconds (5 by default).</p>
      {error && <p class="error" role="alert">{error.message}</p>}
      {[...GROUPS, ["Other", rest.map((o) => o.key)]].map(([title, keys]) => {
        const shown = keys.map((key) => options.find((o) => o.key === key)).filter(Boolean);
        return shown.length ? (
          <section class="options" aria-label={title}>
            <h2>{title}</h2>
            {shown.map((option) => <OptionRow key={option.key} option={option} />)}
          </section>
        ) : null;
      })}
    </>
  );
}
