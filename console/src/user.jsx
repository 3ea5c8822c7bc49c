import { useEffect, useState } from "preact/hooks";
import { call, roleName, usd, when } from "./api.js";
import { SpendChart } from "./chart.jsx";
import { Field, FormError, Pager } from "./ui.jsx";

export function useLoad(load, deps) {
  const [state, setState] = useState({ data: null, error: null });
  useEffect(() => {
    let live = true;
    load().then((data) => live && setState({ data, error: null }), (error) => live && setState({ data: null, error }));
    return () => { live = false; };
  }, deps);
  return state;
}

function SpanPicker({ days, setDays }) {
  return (
    <div class="span" role="group" aria-label="Chart span">
      {[7, 30].map((n) => (
        <button type="button" aria-pressed={days === n} onClick={() => setDays(n)}>{n} days</button>
      ))}
    </div>
  );
}

export function SpendPanel({ path, label }) {
  const [days, setDays] = useState(7);
  const { data, error } = useLoad(() => call("GET", path, { query: { days } }), [days]);
  return (
    <section aria-label={label}>
      <SpanPicker days={days} setDays={setDays} />
      {error && <p class="error" role="alert">{error.message}</p>}
      {data && <SpendChart spend={data.data} label={`${label}, last ${days} days`} />}
    </section>
  );
}

export function limitsText(x) {
  return [x.rpm && `${x.rpm} requests/min`, x.tpm && `${x.tpm} tokens/min`,
    x.max_parallel && `${x.max_parallel} parallel`].filter(Boolean).join(", ") || "none";
}

// The operator's Notice (GET /api/status), for signed-in users too: the Dashboard is where they land.
function Notice() {
  const { data } = useLoad(() => call("GET", "/api/status").then((answer) => answer.data), []);
  if (!data || !data.notice) return null;
  return <section class="notice" aria-label="Notice">{data.notice}</section>;
}

export function Dashboard({ me, reload }) {
  // The cards read the account afresh, as the chart does: the one loaded at sign-in is stale
  // after a call (the Requests card said 3 where the chart, read later, said 4).
  useEffect(() => { reload(); }, []);
  return (
    <>
      <Notice />
      <dl class="cards">
        <div><dt>Balance</dt><dd>{usd(me.quota)}</dd><dd class="units">{me.quota.toLocaleString("en-US")} units</dd></div>
        {me.owed_quota > 0 && <div class="owed"><dt>Owed</dt><dd>{usd(me.owed_quota)}</dd>
          <dd class="units">a refund took back what was spent: repaid from your next top-up; no requests until then</dd></div>}
        <div><dt>Used</dt><dd>{usd(me.used_quota)}</dd></div>
        <div><dt>Requests served</dt><dd>{(me.request_count || 0).toLocaleString("en-US")}</dd>
          <dd class="units">all time; failed ones are not counted</dd></div>
        <div><dt>Budget</dt><dd>{me.budget_usd ? `$${me.budget_usd}` : "none"}</dd>
          {me.budget_usd ? <dd class="units">{me.budget_period}</dd> : null}</div>
        <div><dt>Limits</dt><dd class="small">{limitsText(me)}</dd></div>
      </dl>
      <SpendPanel path="/api/data/self" label="Your spend per day" />
    </>
  );
}

// A top-up's amount as what it did to the balance: "+$3.00", or "-$2.00" for one taken back.
const signed = (units) => (units < 0 ? `-${usd(-units)}` : `+${usd(units)}`);

const TYPES = { 1: "top-up", 2: "consume", 3: "manage", 4: "system", 5: "error", 6: "refund" };

export function Log() {
  const [filters, setFilters] = useState({});
  const [cursors, setCursors] = useState([null]);
  const cursor = cursors[cursors.length - 1];
  const { data, error } = useLoad(() => call("GET", "/api/log/self", { query: { ...filters, cursor, page_size: 20 } }),
    [JSON.stringify(filters), cursor]);
  // The totals of every row the filters select, not of this page only (GET /api/log/self/stat).
  const { data: stat } = useLoad(() => call("GET", "/api/log/self/stat", { query: filters }), [JSON.stringify(filters)]);
  function apply(event) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const seconds = (name) => (form.get(name) ? String(Math.floor(Date.parse(form.get(name) + "Z") / 1000)) : "");
    setFilters({ token_name: form.get("token_name"), model_name: form.get("model_name"), type: form.get("type"),
      start_timestamp: seconds("start"), end_timestamp: seconds("end") });
    setCursors([null]);
  }
  const items = (data && data.data.items) || [];
  return (
    <>
      <form class="filters" onSubmit={apply} aria-label="Filter the log">
        <Field label="Key name" name="token_name" error={error} />
        <Field label="Model" name="model_name" error={error} />
        <label class="field"><span>Type</span>
          <select name="type"><option value="">all</option><option value="1">top-up</option>
            <option value="2">consume</option><option value="5">error</option><option value="6">refund</option>
          </select></label>
        <Field label="From (UTC)" name="start" type="datetime-local" error={error} />
        <Field label="To (UTC)" name="end" type="datetime-local" error={error} />
        <button type="submit">Apply filters</button>
      </form>
      <FormError error={error} fields={["token_name", "model_name"]} />
      {stat && (
        <dl class="cards" aria-label="Totals of the filtered requests">
          <div><dt>Requests</dt><dd>{stat.data.requests.toLocaleString("en-US")}</dd></div>
          <div><dt>Spent</dt><dd>{usd(stat.data.quota)}</dd></div>
          <div><dt>Tokens in/out</dt>
            <dd>{`${stat.data.prompt_tokens.toLocaleString("en-US")}/${stat.data.completion_tokens.toLocaleString("en-US")}`}</dd></div>
          {!stat.data.exact && <div><dt>Note</dt><dd class="small">the newest 10,000 rows only</dd></div>}
        </dl>
      )}
      <div class="table">
        <table aria-label="Requests">
          <thead><tr><th>Time</th><th>Type</th><th>Key</th><th>Model</th><th>Cost</th><th>Tokens in/out</th><th>Duration</th><th>What</th></tr></thead>
          <tbody>
            {items.map((item) => (
              <tr key={item.id}>
                <td>{when(item.created_at)}</td><td>{TYPES[item.type] || item.type}</td><td>{item.token_name}</td>
                <td>{item.model_name}</td><td>{item.type === 1 ? signed(item.quota) : usd(item.quota)}</td>
                <td>{item.prompt_tokens}/{item.completion_tokens}</td>
                <td>{item.type === 1 ? "" : `${item.use_time} s`}</td><td class="what">{item.content}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {data && !items.length && <p>No requests match.</p>}
      <Pager hasPrevious={cursors.length > 1} hasNext={Boolean(data && data.data.next_cursor && data.data.has_more !== false)}
        onFirst={() => setCursors([null])} onNext={() => setCursors([...cursors, data.data.next_cursor])} />
    </>
  );
}

export function Account({ me }) {
  const [error, setError] = useState(null);
  const [done, setDone] = useState(false);
  async function submit(event) {
    event.preventDefault();
    const form = event.currentTarget;
    const fields = new FormData(form);
    setError(null);
    setDone(false);
    try {
      await call("PUT", "/api/user/self", { body: { original_password: fields.get("original_password"),
        password: fields.get("password") } });
      form.reset();
      setDone(true);
    } catch (err) {
      setError(err);
    }
  }
  return (
    <>
      <dl class="facts">
        <dt>User</dt><dd>{me.username} (#{me.id})</dd>
        <dt>Role</dt><dd>{roleName(me.role)}</dd>
        <dt>Email</dt><dd>{me.email || "none"}</dd>
        <dt>Since</dt><dd>{when(me.created_at)}</dd>
      </dl>
      <form onSubmit={submit} aria-label="Change password">
        <h2>Change password</h2>
        <Field label="Current password" name="original_password" type="password" autocomplete="current-password"
          required error={error} />
        <Field label="New password" name="password" type="password" autocomplete="new-password" minLength={8}
          required error={error} />
        <FormError error={error} fields={["original_password", "password"]} />
        {done && <p role="status">Password changed.</p>}
        <button type="submit">Change password</button>
      </form>
    </>
  );
}
