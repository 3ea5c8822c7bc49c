// The user's own keys: /api/token/ (new-api's shape). A new key is shown once, with a copy button:
// the gateway keeps only its SHA-256 (and a hint), so no page can show it again. A key's settings
// are edited in place (PUT /api/token/, new-api's shape: the fields sent replace theirs).
import { useState } from "preact/hooks";
import { API_BASE, call, DOCS_URL, UNITS_PER_USD, usd, when } from "./api.js";
import { Field, FormError, inWords, Pager } from "./ui.jsx";
import { useLoad } from "./user.jsx";

const STATUS = { 1: "enabled", 2: "disabled", 3: "expired", 4: "quota used up" };
const KEY_FIELDS = ["name", "model_limits", "expired_time", "remain_quota", "rpm", "tpm", "max_parallel",
  "budget_usd", "budget_period"];

function number(form, name) {
  const text = String(form.get(name) || "").trim();
  return text === "" ? undefined : Number(text);
}

function NewKey({ onMade }) {
  const [error, setError] = useState(null);
  const [made, setMade] = useState(null);
  const [copied, setCopied] = useState(false);
  async function submit(event) {
    event.preventDefault();
    const formEl = event.currentTarget;
    const form = new FormData(formEl);
    const models = String(form.get("model_limits") || "").trim();
    const expiry = String(form.get("expired_time") || "");
    const quotaUsd = number(form, "remain_quota");
    const budget = number(form, "budget_usd");
    const body = {
      name: String(form.get("name") || ""),
      model_limits_enabled: Boolean(models), model_limits: models,
      expired_time: expiry ? Math.floor(Date.parse(expiry + "T23:59:59Z") / 1000) : -1,
      unlimited_quota: quotaUsd === undefined,
      rpm: number(form, "rpm"), tpm: number(form, "tpm"), max_parallel: number(form, "max_parallel"),
    };
    if (quotaUsd !== undefined) body.remain_quota = Math.round(quotaUsd * UNITS_PER_USD);
    if (budget !== undefined) {
      body.budget_usd = budget;
      body.budget_period = form.get("budget_period");
    }
    setError(null);
    setCopied(false);
    try {
      const answer = await call("POST", "/api/token/", { body });
      setMade(answer.data);
      formEl.reset();
      onMade();
    } catch (err) {
      setError(err);
    }
  }
  async function copy() {
    await navigator.clipboard.writeText(made.key);
    setCopied(true);
  }
  return (
    <>
      {made && (
        <section class="card secret" aria-label="New key">
          <p>Your new key <strong>{made.name}</strong>. It is shown only now: copy it somewhere safe.</p>
          <code aria-label="The new key">{made.key}</code>
          <div class="row">
            <button type="button" onClick={copy}>Copy</button>
            <button type="button" onClick={() => setMade(null)}>Done</button>
            {copied && <span role="status">Copied.</span>}
          </div>
        </section>
      )}
      <form class="card" onSubmit={submit} aria-label="Create key">
        <h2>Create key</h2>
        <Field label="Name" name="name" required maxLength={50} error={error} />
        <Field label="Models (comma-separated; empty: all)" name="model_limits" error={error} />
        <Field label="Expires on (UTC; empty: never)" name="expired_time" type="date" error={error} />
        <Field label="Quota in USD (empty: the account's)" name="remain_quota" type="number" min="0" step="0.01"
          error={error} />
        <div class="row">
          <Field label="Requests per minute" name="rpm" type="number" min="0" error={error} />
          <Field label="Tokens per minute" name="tpm" type="number" min="0" error={error} />
          <Field label="Parallel requests" name="max_parallel" type="number" min="0" error={error} />
        </div>
        <div class="row">
          <Field label="Budget in USD" name="budget_usd" type="number" min="0" step="0.01" error={error} />
          <label class="field"><span>Budget period</span>
            <select name="budget_period"><option value="daily">daily</option><option value="weekly">weekly</option>
              <option value="monthly">monthly</option></select></label>
        </div>
        <FormError error={error} fields={KEY_FIELDS} />
        <button type="submit">Create key</button>
      </form>
    </>
  );
}

function day(seconds) {
  return seconds > 0 ? new Date(seconds * 1000).toISOString().slice(0, 10) : "";
}

// Edit a key: every field shown with its value; an empty box is "none" (no limit, no expiry, the
// account's quota, every model, the account's group).
function EditKey({ token, groups, onDone, onCancel }) {
  const [error, setError] = useState(null);
  async function submit(event) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const models = String(form.get("model_limits") || "").trim();
    const expiry = String(form.get("expired_time") || "");
    const quotaUsd = number(form, "remain_quota");
    const budget = number(form, "budget_usd");
    const body = {
      id: token.id, name: String(form.get("name") || ""),
      model_limits_enabled: Boolean(models), model_limits: models,
      expired_time: expiry ? Math.floor(Date.parse(expiry + "T23:59:59Z") / 1000) : -1,
      unlimited_quota: quotaUsd === undefined, group: String(form.get("group") || ""),
      rpm: number(form, "rpm") || 0, tpm: number(form, "tpm") || 0, max_parallel: number(form, "max_parallel") || 0,
      budget_usd: budget || 0,
    };
    if (quotaUsd !== undefined) body.remain_quota = Math.round(quotaUsd * UNITS_PER_USD);
    if (budget) body.budget_period = form.get("budget_period");
    setError(null);
    try {
      await call("PUT", "/api/token/", { body });
      onDone(body.name);
    } catch (err) {
      setError(err);
    }
  }
  const label = `Edit key ${token.name}`;
  return (
    <form class="card" onSubmit={submit} aria-label={label}>
      <h2>{label}</h2>
      <p class="note">The key itself cannot be shown again: the gateway keeps only a hash of it ({token.key}).
        Lost it? Create a new key and delete this one.</p>
      <Field label="Name" name="name" required maxLength={50} defaultValue={token.name} error={error} />
      <Field label="Models (comma-separated; empty: all)" name="model_limits" defaultValue={token.model_limits}
        error={error} />
      <div class="field"><label><span>Group</span>
        <select name="group">
          <option value="">the account's</option>
          {Object.keys(groups || {}).map((name) => <option value={name} selected={name === token.group}>{name}</option>)}
        </select></label>
        {error && error.param === "group" && <span class="error" role="alert">{inWords(error.message, "group")}</span>}
      </div>
      <Field label="Expires on (UTC; empty: never)" name="expired_time" type="date"
        defaultValue={day(token.expired_time)} error={error} />
      <Field label="Quota in USD (empty: the account's)" name="remain_quota" type="number" min="0" step="any"
        defaultValue={token.unlimited_quota ? "" : String(token.remain_quota / UNITS_PER_USD)} error={error} />
      <div class="row">
        <Field label="Requests per minute" name="rpm" type="number" min="0" defaultValue={token.rpm || ""} error={error} />
        <Field label="Tokens per minute" name="tpm" type="number" min="0" defaultValue={token.tpm || ""} error={error} />
        <Field label="Parallel requests" name="max_parallel" type="number" min="0" defaultValue={token.max_parallel || ""}
          error={error} />
      </div>
      <div class="row">
        <Field label="Budget in USD" name="budget_usd" type="number" min="0" step="0.01"
          defaultValue={token.budget_usd || ""} error={error} />
        <label class="field"><span>Budget period</span>
          <select name="budget_period">
            {["daily", "weekly", "monthly"].map((period) => (
              <option value={period} selected={period === token.budget_period}>{period}</option>))}
          </select></label>
      </div>
      <FormError error={error} fields={[...KEY_FIELDS, "group"]} />
      <div class="row">
        <button type="submit">Save key</button>
        <button type="button" class="secondary" onClick={onCancel}>Cancel</button>
      </div>
    </form>
  );
}

// Where a key is used: the gateway this console is served by, with the API docs beside it.
function Endpoint() {
  const [copied, setCopied] = useState(false);
  async function copy() {
    await navigator.clipboard.writeText(API_BASE);
    setCopied(true);
  }
  return (
    <section class="card endpoint" aria-label="Where to send requests">
      <h2>Where to send requests</h2>
      <p>API base URL (OpenAI-compatible: set it as the SDK's <code>base_url</code>, and a key as its API key):</p>
      <code aria-label="API base URL">{API_BASE}</code>
      <div class="row">
        <button type="button" onClick={copy} aria-label="Copy the API base URL">Copy</button>
        <a href={DOCS_URL} target="_blank" rel="noopener">API docs</a>
        {copied && <span role="status">Base URL copied.</span>}
      </div>
    </section>
  );
}

export function Keys({ reload }) {
  const [deleting, setDeleting] = useState(null);
  const [editing, setEditing] = useState(null);
  const [saved, setSaved] = useState(null);
  const { data: groups } = useLoad(() => call("GET", "/api/user/self/groups"), []);
  const [page, setPage] = useState(0);
  const [tick, setTick] = useState(0);
  const [error, setError] = useState(null);
  const { data, error: loadError } = useLoad(() => call("GET", "/api/token/", { query: { p: page, size: 20 } }),
    [page, tick]);
  const refresh = () => { setTick(tick + 1); reload(); };
  async function act(promise) {
    setError(null);
    try {
      await promise();
      refresh();
    } catch (err) {
      setError(err);
    }
  }
  const items = (data && data.data.items) || [];
  const total = (data && data.data.total) || 0;
  return (
    <>
      <Endpoint />
      {editing ? (
        <EditKey key={editing.id} token={editing} groups={groups && groups.data}
          onDone={(name) => { setEditing(null); setSaved(name); refresh(); }} onCancel={() => setEditing(null)} />
      ) : <NewKey onMade={refresh} />}
      {saved && <p role="status">Saved key {saved}.</p>}
      {(error || loadError) && <p class="error" role="alert">{(error || loadError).message}</p>}
      <div class="table">
        <table aria-label="Keys">
          <thead><tr><th>Name</th><th>Key</th><th>Status</th><th>Models</th><th>Quota</th><th>Used</th><th>Limits</th><th>Expires</th><th>Last used</th><th>Actions</th></tr></thead>
          <tbody>
            {items.map((t) => (
              <tr key={t.id}>
                <td>{t.name}</td><td><code>{t.key}</code></td><td>{STATUS[t.status] || t.status}</td>
                <td>{t.model_limits || "all"}</td><td>{t.unlimited_quota ? "account's" : usd(t.remain_quota)}</td>
                <td>{usd(t.used_quota)}</td>
                <td>{[t.rpm && `${t.rpm} rpm`, t.tpm && `${t.tpm} tpm`, t.max_parallel && `${t.max_parallel} parallel`,
                  t.budget_usd && `$${t.budget_usd} ${t.budget_period}`].filter(Boolean).join(", ") || "none"}</td>
                <td>{t.expired_time === -1 ? "never" : when(t.expired_time)}</td><td>{when(t.accessed_time)}</td>
                <td><div class="actions">
                  <button type="button" aria-label={`Edit key ${t.name}`}
                    onClick={() => { setSaved(null); setEditing(t); window.scrollTo(0, 0); }}>Edit</button>
                  <button type="button" aria-label={`${t.status === 1 ? "Disable" : "Enable"} key ${t.name}`}
                    onClick={() => act(() => call("PUT", "/api/token/", { query: { status_only: "true" },
                      body: { id: t.id, status: t.status === 1 ? 2 : 1 } }))}>
                    {t.status === 1 ? "Disable" : "Enable"}
                  </button>
                  {deleting === t.id ? (
                    <>
                      <button type="button" class="danger" aria-label={`Confirm delete key ${t.name}`}
                        onClick={() => { setDeleting(null); act(() => call("DELETE", `/api/token/${encodeURIComponent(t.id)}`)); }}>
                        Confirm delete</button>
                      <button type="button" aria-label={`Keep key ${t.name}`} onClick={() => setDeleting(null)}>Keep</button>
                    </>
                  ) : (
                    <button type="button" aria-label={`Delete key ${t.name}`} onClick={() => setDeleting(t.id)}>Delete</button>
                  )}
                </div></td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {data && !items.length && <p>No keys yet.</p>}
      <Pager hasPrevious={page > 0} hasNext={(page + 1) * 20 < total} onFirst={() => setPage(0)}
        onNext={() => setPage(page + 1)} />
    </>
  );
}
