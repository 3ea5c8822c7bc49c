import { useEffect, useState } from "preact/hooks";
import { call, usd, when } from "./api.js";
import { Choice, Field, FormError, Pager } from "./ui.jsx";
import { useLoad } from "./user.jsx";

// The user's own asynchronous tasks (GET /api/task/self), newest first, a page at a time; each
// row's result links are the ones its family's own answer hands out (signed links of the gateway's).
const FAMILIES = ["alpha", "beta", "delta", "epsilon", "gamma", "imgtask", "zeta"];
const STATUSES = ["submitted", "queued", "in_progress", "succeeded", "failed", "cancelled"];
const PAGE_SIZE = 20;
const OPEN = ["submitted", "queued", "in_progress"];
const REFRESH_MS = 5000; // while a task on the page is unfinished, the page reads itself again

// Only web links become anchors: an upstream's relayed URL is data, never a script to run.
function web(link) {
  return /^https?:\/\//i.test(link);
}

function cost(item) {
  if (item.units_charged !== null && item.units_charged !== undefined) return `${usd(item.units_charged)} charged`;
  return `${usd(item.units_held)} held`;
}

export function Tasks() {
  const [filters, setFilters] = useState({});
  const [page, setPage] = useState(1);
  const [reads, setReads] = useState(0);
  const { data, error } = useLoad(() => call("GET", "/api/task/self", { query: { ...filters, p: page, page_size: PAGE_SIZE } }),
    [JSON.stringify(filters), page, reads]);
  const items = (data && data.data.items) || [];
  const running = items.some((item) => OPEN.includes(item.status));
  useEffect(() => {
    if (!running) return undefined;
    const timer = setTimeout(() => setReads(reads + 1), REFRESH_MS);
    return () => clearTimeout(timer);
  }, [running, reads, data]);
  function apply(event) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const seconds = (name) => (form.get(name) ? String(Math.floor(Date.parse(form.get(name) + "Z") / 1000)) : "");
    setFilters({ family: form.get("family"), status: form.get("status"),
      start_timestamp: seconds("start_timestamp"), end_timestamp: seconds("end_timestamp") });
    setPage(1);
    setReads(reads + 1);
  }
  return (
    <>
      <form class="filters" onSubmit={apply} aria-label="Filter the tasks">
        <Choice label="Family" name="family" options={FAMILIES} error={error} />
        <Choice label="Status" name="status" options={STATUSES} error={error} />
        <Field label="From (UTC)" name="start_timestamp" type="datetime-local" error={error} />
        <Field label="To (UTC)" name="end_timestamp" type="datetime-local" error={error} />
        <button type="submit">Apply filters</button>
        <button type="button" onClick={() => setReads(reads + 1)}>Refresh</button>
      </form>
      <FormError error={error} fields={["family", "status", "start_timestamp", "end_timestamp"]} />
      <div class="table">
        <table class="stack" aria-label="Tasks">
          <thead><tr><th>Task</th><th>Status</th><th>Cost</th><th>Result</th></tr></thead>
          <tbody>
            {items.map((item) => (
              <tr key={item.task_id}>
                <td class="task"><code>{item.task_id}</code>
                  <br /><span class="note">{item.family} · {item.model}</span>
                  <br /><span class="note">created {when(item.created_at)}</span></td>
                <td><span class={`status ${item.status}`}>{item.status.replace("_", " ")}</span>
                  {item.public_status !== item.status && <span class="note"> ({item.public_status})</span>}
                  <br /><progress max="100" value={item.progress} aria-label={`Progress of ${item.task_id}`}>{item.progress}%</progress> {item.progress}%
                  <br /><span class="note">updated {when(item.updated_at)}</span></td>
                <td>{cost(item)}</td>
                <td class="what">
                  {item.result_links.filter(web).map((link, n) => (
                    <a href={link} target="_blank" rel="noopener noreferrer"
                      aria-label={`Open result ${n + 1} of ${item.task_id}`}>{`Result ${n + 1}`}</a>
                  ))}
                  {item.error && <span class="error">{item.error}</span>}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {data && !items.length && <p>No tasks match.</p>}
      {data && <p class="note">Page {data.data.page}{data.data.total_exact ? ` of ${Math.max(1, Math.ceil(data.data.total / PAGE_SIZE))}` : ""}</p>}
      <Pager hasPrevious={page > 1} hasNext={Boolean(data && data.data.has_more)}
        onFirst={() => setPage(1)} onNext={() => setPage(page + 1)} />
    </>
  );
}
