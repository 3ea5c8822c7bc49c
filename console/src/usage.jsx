// The Usage page: tokens and spend per day and model (GET /api/data/self; operators also see
// everyone's, GET /api/data/), and the request log of a date range as CSV
// (GET /api/log/self/export).
import { useState } from "preact/hooks";
import { call, fetchText, usd } from "./api.js";
import { Field, FormError } from "./ui.jsx";
import { useLoad } from "./user.jsx";

function UsageTable({ path, label }) {
  const [days, setDays] = useState(7);
  const { data, error } = useLoad(() => call("GET", path, { query: { days } }), [days]);
  const rows = (data && data.data.rows) || [];
  return (
    <section aria-label={label}>
      <h2>{label}</h2>
      <div class="span" role="group" aria-label={`${label} span`}>
        {[7, 30, 90].map((n) => (
          <button type="button" aria-pressed={days === n} onClick={() => setDays(n)}>{n} days</button>
        ))}
      </div>
      {error && <p class="error" role="alert">{error.message}</p>}
      <div class="table">
        <table aria-label={label}>
          <thead><tr><th>Day</th><th>Model</th><th>Requests</th><th>Input tokens</th><th>Output tokens</th>
            <th>Spend</th></tr></thead>
          <tbody>
            {rows.map((r) => (
              <tr><td>{r.day}</td><td>{r.model_name}</td><td>{r.count}</td><td>{r.prompt_tokens}</td>
                <td>{r.completion_tokens}</td><td>{usd(r.quota)}</td></tr>
            ))}
          </tbody>
        </table>
      </div>
    </section>
  );
}

function Export() {
  const [error, setError] = useState(null);
  const [note, setNote] = useState(null);
  async function submit(event) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const seconds = (name, end) => (form.get(name)
      ? String(Math.floor(Date.parse(form.get(name) + (end ? "T23:59:59Z" : "T00:00:00Z")) / 1000)) : "");
    setError(null);
    setNote(null);
    try {
      const { text, truncated } = await fetchText("/api/log/self/export",
        { start_timestamp: seconds("from", false), end_timestamp: seconds("to", true) });
      const link = document.createElement("a");
      link.href = URL.createObjectURL(new Blob([text], { type: "text/csv" }));
      link.download = `request-log-${form.get("from")}-${form.get("to")}.csv`;
      link.click();
      setTimeout(() => URL.revokeObjectURL(link.href), 60000);  // the download reads it after the click
      const rows = Math.max(text.split(/\r?\n/).filter(Boolean).length - 1, 0);
      setNote(`${rows} requests exported${truncated ? " (the newest only: narrow the range for the rest)" : ""}.`);
    } catch (err) {
      setError(err);
    }
  }
  return (
    <section aria-label="Export the request log">
      <h2>Export the request log</h2>
      <form class="filters" onSubmit={submit} aria-label="Export the request log as CSV">
        <Field label="From (UTC day)" name="from" type="date" required error={error} />
        <Field label="To (UTC day)" name="to" type="date" required error={error} />
        <FormError error={error} />
        <button type="submit">Export CSV</button>
      </form>
      {note && <p role="status">{note}</p>}
    </section>
  );
}

export function Usage({ me }) {
  return (
    <>
      <UsageTable path="/api/data/self" label="Your usage per day and model" />
      {me.role >= 10 && <UsageTable path="/api/data" label="Everyone's usage per day and model" />}
      <Export />
    </>
  );
}
