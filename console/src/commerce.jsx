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

function OptionRow({ option }) {
  const [value, setValue] = useState(option.value);
  const [error, setError] = useState(null);
  const [saved, setSaved] = useState(false);
  const id = `option-${option.key}`;
  const yesNo = option.value === "true" || option.value === "false";
  async function submit(event) {
    event.preventDefault();
    setError(null);
    setSaved(false);
    try {
      await call("PUT", "/api/option/", { body: { key: option.key, value } });
      setSaved(true);
    } catch (err) {
      setError(err);
    }
  }
  return (
    <form class="option" onSubmit={submit} aria-label={option.key}>
      <label for={id}><code>{option.key}</code></label>
      <p class="note" id={`${id}-about`}>{option.description}</p>
      <div class="row">
        {yesNo ? (
          <select id={id} name="value" value={value} aria-describedby={`${id}-about`}
            onChange={(e) => { setValue(e.currentTarget.value); setSaved(false); }}>
            <option value="true">true</option><option value="false">false</option>
          </select>
        ) : (
          <input id={id} name="value" value={value} aria-describedby={`${id}-about`}
            aria-invalid={error ? "true" : undefined}
            onInput={(e) => { setValue(e.currentTarget.value); setSaved(false); }} />
        )}
        <button type="submit" aria-label={`Save ${option.key}`}>Save</button>
        {saved && <span role="status">Saved.</span>}
      </div>
      {error && <p class="error" role="alert">{error.message}</p>}
    </form>
  );
}

export function Settings() {
  const { data, error } = useLoad(() => call("GET", "/api/option/"), []);
  return (
    <>
      <p class="note">Every instance reads a changed setting within the key cache's seconds (5 by default).</p>
      {error && <p class="error" role="alert">{error.message}</p>}
      <div class="options">
        {((data && data.data) || []).map((option) => <OptionRow key={option.key} option={option} />)}
      </div>
    </>
  );
}
