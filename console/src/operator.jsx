import { useState } from "preact/hooks";
import { call, roleName, UNITS_PER_USD, usd } from "./api.js";
import { Field, FormError, matches, Pager, Search } from "./ui.jsx";
import { limitsText, SpendPanel, useLoad } from "./user.jsx";

function AddQuota({ user, onDone }) {
  const [error, setError] = useState(null);
  async function submit(event) {
    event.preventDefault();
    const form = event.currentTarget;
    const amount = Number(new FormData(form).get("usd"));
    setError(null);
    try {
      const answer = await call("POST", `/api/admin/users/${user.id}/quota`,
        { body: { quota: Math.round(amount * UNITS_PER_USD) } });
      form.reset();
      onDone(`Added $${amount.toFixed(2)} to ${user.username}: the balance is ${usd(answer.data.quota)}.`);
    } catch (err) {
      setError(err);
    }
  }
  return (
    <form class="inline" onSubmit={submit} aria-label={`Add quota to ${user.username}`}>
      <label><span class="sr">USD to add to {user.username}</span>
        <input name="usd" type="number" min="0.01" step="0.01" required placeholder="USD"
          aria-invalid={error ? "true" : undefined} /></label>
      <button type="submit">Add quota</button>
      {error && <span class="error" role="alert">{error.message}</span>}
    </form>
  );
}

function SetLimits({ user, onDone }) {
  const [error, setError] = useState(null);
  async function submit(event) {
    event.preventDefault();
    const f = new FormData(event.currentTarget);
    const body = {};
    for (const name of ["rpm", "tpm", "max_parallel", "budget_usd"]) {
      const text = String(f.get(name) || "").trim();
      if (text !== "") body[name] = Number(text);
    }
    if (body.budget_usd) body.budget_period = f.get("budget_period");
    setError(null);
    try {
      await call("PUT", `/api/admin/users/${user.id}/limits`, { body });
      onDone();
    } catch (err) {
      setError(err);
    }
  }
  return (
    <details>
      <summary>Limits: {limitsText(user)}{user.budget_usd ? `, $${user.budget_usd} ${user.budget_period}` : ""}</summary>
      <form onSubmit={submit} aria-label={`Set limits of ${user.username}`}>
        <Field label="Requests per minute" name="rpm" type="number" min="0" placeholder={user.rpm} error={error} />
        <Field label="Tokens per minute" name="tpm" type="number" min="0" placeholder={user.tpm} error={error} />
        <Field label="Parallel requests" name="max_parallel" type="number" min="0" placeholder={user.max_parallel}
          error={error} />
        <Field label="Budget in USD (0: none)" name="budget_usd" type="number" min="0" step="0.01"
          placeholder={user.budget_usd} error={error} />
        <label class="field"><span>Budget period</span>
          <select name="budget_period"><option value="daily">daily</option><option value="weekly">weekly</option>
            <option value="monthly">monthly</option></select></label>
        <FormError error={error} fields={["rpm", "tpm", "max_parallel", "budget_usd"]} />
        <button type="submit">Set limits</button>
      </form>
    </details>
  );
}

function NewUser({ onDone }) {
  const [error, setError] = useState(null);
  const [made, setMade] = useState(null);
  async function submit(event) {
    event.preventDefault();
    const form = event.currentTarget;
    const f = new FormData(form);
    setError(null);
    try {
      const answer = await call("POST", "/api/admin/users", { body: { username: f.get("username"),
        password: f.get("password"), role: Number(f.get("role")),
        quota: Math.round(Number(f.get("usd") || 0) * UNITS_PER_USD) } });
      setMade(answer.data);
      form.reset();
      onDone();
    } catch (err) {
      setError(err);
    }
  }
  return (
    <form class="card" onSubmit={submit} aria-label="Create user">
      <h2>Create user</h2>
      <Field label="Username" name="username" required maxLength={64} error={error} autocomplete="off" />
      <Field label="Password" name="password" type="password" required minLength={8} error={error}
        autocomplete="new-password" />
      <label class="field"><span>Role</span>
        <select name="role"><option value="1">user</option><option value="10">operator</option></select></label>
      <Field label="Quota (USD)" name="usd" type="number" min="0" step="0.01" error={error} />
      <FormError error={error} fields={["username", "password"]} />
      {made && <p role="status">Created user {made.username} (#{made.id}).</p>}
      <button type="submit">Create user</button>
    </form>
  );
}

export function Users({ reload }) {
  const [afters, setAfters] = useState([null]);
  const [tick, setTick] = useState(0);
  const [error, setError] = useState(null);
  const [note, setNote] = useState(null);
  const after = afters[afters.length - 1];
  const { data, error: loadError } = useLoad(() => call("GET", "/api/admin/users", { query: { after, page_size: 20 } }),
    [after, tick]);
  const refresh = (message) => { setNote(typeof message === "string" ? message : null); setTick(tick + 1); reload(); };
  async function toggle(user) {
    setError(null);
    try {
      await call("PUT", `/api/admin/users/${user.id}/status`, { body: { status: user.status === 1 ? 2 : 1 } });
      refresh();
    } catch (err) {
      setError(err);
    }
  }
  const [query, setQuery] = useState("");
  const items = ((data && data.data.items) || []).filter((u) => matches(query, u.username, u.display_name || "",
    u.email || "", `#${u.id}`, u.group || "", roleName(u.role)));
  return (
    <>
      <NewUser onDone={refresh} />
      {note && <p role="status">{note}</p>}
      {(error || loadError) && <p class="error" role="alert">{(error || loadError).message}</p>}
      <Search label="Search users on this page" value={query} onInput={setQuery} />
      <div class="table">
        <table aria-label="Users" class="stack">
          <thead><tr><th>Id</th><th>User</th><th>Role</th><th>Status</th><th>Balance</th><th>Used</th><th>Requests</th><th>Actions</th></tr></thead>
          <tbody>
            {items.map((user) => (
              <tr key={user.id}>
                <td>{user.id}</td><td class="name">{user.username}</td><td>{roleName(user.role)}</td>
                <td>{user.status === 1 ? "enabled" : "disabled"}</td>
                <td>{usd(user.quota)}{user.owed_quota > 0 && <span class="owed">{` (owes ${usd(user.owed_quota)})`}</span>}</td><td>{usd(user.used_quota)}</td><td>{user.request_count}</td>
                <td><div class="actions">
                  <AddQuota user={user} onDone={refresh} />
                  <SetLimits user={user} onDone={refresh} />
                  <button type="button" onClick={() => toggle(user)}
                    aria-label={`${user.status === 1 ? "Disable" : "Enable"} ${user.username}`}>
                    {user.status === 1 ? "Disable" : "Enable"}
                  </button>
                </div></td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      <Pager hasPrevious={afters.length > 1} hasNext={Boolean(data && data.data.next_after)}
        onFirst={() => setAfters([null])} onNext={() => setAfters([...afters, data.data.next_after])} />
    </>
  );
}

export function Spend() {
  return <SpendPanel path="/api/admin/spend" label="Spend of all users per day" />;
}

