// The operator's Channels page: every channel with its health; the ones added here are added,
// edited, disabled or enabled, deleted and tested through /api/channel/ (new-api's routes). The
// channels document's are read-only here (changed in the document), but disabled, enabled and
// tested like the others. An upstream key is written once: only its last four are ever shown.
import { useState } from "preact/hooks";
import { call } from "./api.js";
import { Field, FormError, matches, Search } from "./ui.jsx";
import { useLoad } from "./user.jsx";

// The protocols (the channels document's names) by the vendors whose API they speak (docs/tasks.md).
const PROTOCOLS = [["chat", "OpenAI-compatible (chat completions)"], ["messages", "Anthropic (messages)"],
  ["content", "Google Gemini (generateContent)"], ["alpha", "Kling (video and images)"],
  ["beta", "Black Forest Labs FLUX (images)"], ["gamma", "Alibaba DashScope (video)"],
  ["delta", "Google Veo (video)"], ["epsilon", "OpenAI Sora (videos)"], ["zeta", "ByteDance Ark Seedance (video)"],
  ["imgtask", "Midjourney proxy (images)"], ["azure", "Azure OpenAI (deployments)"],
  ["bedrock", "Amazon Bedrock (Converse; key AK|SK|REGION or an API key)"], ["cohere", "Cohere (rerank)"],
  ["jina", "Jina-compatible (rerank)"]];
const VENDOR = Object.fromEntries(PROTOCOLS);
const FIELDS = ["name", "protocol", "base_url", "key", "models", "model_map", "priority", "weight", "groups"];

function words(text) {
  return String(text || "").split(/[\s,]+/).map((w) => w.trim()).filter(Boolean);
}

// "alias=upstream, other=model" <-> {alias: "upstream", other: "model"}
function mapText(map) {
  return Object.entries(map || {}).map(([from, to]) => `${from}=${to}`).join(", ");
}

function mapOf(text) {
  const map = {};
  for (const pair of words(text)) {
    const at = pair.indexOf("=");
    if (at < 1) throw Object.assign(new Error(`model_map: '${pair}' is not model=upstream model`), { param: "model_map" });
    map[pair.slice(0, at)] = pair.slice(at + 1);
  }
  return map;
}

// The body from the form: every field the operator filled (a key left empty keeps the old one).
function bodyOf(form, editing) {
  const f = new FormData(form);
  const body = {
    protocol: f.get("protocol"), base_url: String(f.get("base_url") || "").trim(),
    models: words(f.get("models")), model_map: mapOf(f.get("model_map")),
    priority: Number(f.get("priority") || 0), weight: Number(f.get("weight") === "" ? 1 : f.get("weight")),
  };
  if (!editing) body.name = String(f.get("name") || "").trim();
  const key = String(f.get("key") || "");
  if (key || !editing) body.key = key;
  const groups = words(f.get("groups"));
  if (groups.length || (editing && editing.groups)) body.groups = groups;
  return body;
}

function ChannelForm({ channel, onDone, onCancel }) {
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const editing = channel || null;
  async function submit(event) {
    event.preventDefault();
    const form = event.currentTarget;
    setError(null);
    setBusy(true);
    try {
      const body = bodyOf(form, editing);
      if (editing) await call("PUT", "/api/channel/", { body: { id: editing.id, ...body } });
      else await call("POST", "/api/channel/", { body });
      if (!editing) form.reset();
      onDone(editing ? `Saved channel ${editing.name}.` : `Added channel ${body.name}.`);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }
  const c = editing || {};
  const title = editing ? `Edit channel ${editing.name}` : "Add channel";
  return (
    <form class="card" onSubmit={submit} aria-label={title}>
      <h2>{title}</h2>
      {!editing && <Field label="Name" name="name" required autocomplete="off" error={error} />}
      <label class="field"><span>Protocol</span>
        <select name="protocol" defaultValue={c.protocol || "chat"}>
          {PROTOCOLS.map(([p, vendor]) => <option value={p}>{vendor}</option>)}
        </select></label>
      <Field label="Base URL" name="base_url" type="url" required defaultValue={c.base_url || ""} error={error}
        placeholder="https://api.example.com" />
      <Field label={editing ? `Upstream key (now …${c.key_last4 || "****"}; empty keeps it)` : "Upstream key"}
        name="key" type="password" required={!editing} autocomplete="off" error={error} />
      <Field label="Models (comma separated; * for any)" name="models" required defaultValue={(c.models || []).join(", ")}
        error={error} />
      <Field label="Model map (model=upstream model, comma separated)" name="model_map"
        defaultValue={mapText(c.model_map)} error={error} />
      <Field label="Priority (higher first)" name="priority" type="number" step="1" defaultValue={c.priority ?? 0}
        error={error} />
      <Field label="Weight" name="weight" type="number" min="0" step="1" defaultValue={c.weight ?? 1} error={error} />
      <Field label="Groups (comma separated; empty: every group)" name="groups"
        defaultValue={(c.groups || []).join(", ")} error={error} />
      <FormError error={error} fields={FIELDS} />
      <button type="submit" disabled={busy}>{editing ? "Save channel" : "Add channel"}</button>
      {editing && <button type="button" onClick={onCancel}>Cancel</button>}
    </form>
  );
}

function health(c) {
  if (c.shadowed) return "not in force: the channels document has a channel of this name";
  if (c.state === "cooling") return `cooling until ${c.cooling_until}`;
  if (c.state === "healthy" && c.failures) return `healthy, ${c.failures} recent failure${c.failures > 1 ? "s" : ""}`;
  return c.state;
}

// The last test (an operator's or the sweeper's probe): when, and what the upstream said.
function lastTest(c) {
  if (!c.last_probe_at) return "never";
  const at = c.last_probe_at.replace("T", " ").replace("+00:00", " UTC");
  const took = c.last_probe_ms ? ` in ${c.last_probe_ms} ms` : "";
  return c.last_probe === "ok" ? `passed${took} ${at}` : `failed${took} ${at}: ${c.last_probe}`;
}

export function Channels() {
  const [tick, setTick] = useState(0);
  const [editing, setEditing] = useState(null);
  const [deleting, setDeleting] = useState(null);
  const [note, setNote] = useState(null);
  const [error, setError] = useState(null);
  const { data, error: loadError } = useLoad(() => call("GET", "/api/channel/", { query: { page_size: 100 } }), [tick]);
  const refresh = (message) => { setNote(message || null); setTick(tick + 1); };

  async function act(work) {
    setError(null);
    setNote(null);
    try {
      await work();
    } catch (err) {
      setError(err);
    }
  }
  const target = (c) => (c.id === null ? { name: c.name } : { id: c.id });
  const toggle = (c) => act(async () => {
    await call("PUT", "/api/channel/", { body: { ...target(c), status: c.status === 2 ? 1 : 2 } });
    refresh(`${c.status === 2 ? "Enabled" : "Disabled"} channel ${c.name}.`);
  });
  const remove = (c) => act(async () => {
    await call("DELETE", `/api/channel/${c.id}`);
    setDeleting(null);
    refresh(`Deleted channel ${c.name}.`);
  });
  const test = (c) => act(async () => {
    const ref = c.id === null ? encodeURIComponent(c.name) : c.id;
    try {
      const answer = await call("GET", `/api/channel/test/${ref}`);
      setNote(`Test of ${c.name}: ok in ${answer.data.latency_ms} ms. ${answer.data.answer}`);
    } catch (err) {
      setError(Object.assign(new Error(`Test of ${c.name}: ${err.message}`), { status: err.status }));
    }
    setTick(tick + 1);
  });

  // Test all (new-api's): every channel in force, one after another, then one summary.
  const [testing, setTesting] = useState(false);
  const testAll = (list) => act(async () => {
    setTesting(true);
    let passed = 0;
    const failed = [];
    for (const c of list) {
      try {
        await call("GET", `/api/channel/test/${c.id === null ? encodeURIComponent(c.name) : c.id}`);
        passed += 1;
      } catch {
        failed.push(c.name);
      }
    }
    setTesting(false);
    refresh(`Tested ${list.length} channel${list.length === 1 ? "" : "s"}: ${passed} passed`
      + (failed.length ? `, ${failed.length} failed (${failed.join(", ")}).` : "."));
  });

  const [query, setQuery] = useState("");
  const rows = ((data && data.data.items) || []).filter((c) => matches(query, c.name, c.protocol,
    VENDOR[c.protocol] || "", c.base_url, (c.models || []).join(" "), c.state));
  return (
    <>
      <p class="note">Channels added here are data: in force on every instance within seconds, their upstream key
        stored once and shown only by its last four characters. Channels from the channels document are changed
        in the document (which wins a name); here they are only disabled, enabled and tested.</p>
      {editing ? <ChannelForm key={editing.id} channel={editing} onCancel={() => setEditing(null)}
        onDone={(message) => { setEditing(null); refresh(message); }} />
        : <details class="add"><summary>New channel</summary><ChannelForm onDone={refresh} /></details>}
      {note && <p role="status">{note}</p>}
      {(error || loadError) && <p class="error" role="alert">{(error || loadError).message}</p>}
      <div class="row">
        <Search label="Search channels" value={query} onInput={setQuery} />
        <button type="button" disabled={testing || !data} aria-label="Test all channels"
          onClick={() => testAll(((data && data.data.items) || []).filter((c) => !c.shadowed))}>
          {testing ? "Testing…" : "Test all"}</button>
      </div>
      <div class="table">
        <table aria-label="Channels" class="stack wrap">
          <thead><tr><th>Name</th><th>Source</th><th>Protocol</th><th>Base URL</th><th>Models</th><th>Priority</th>
            <th>Weight</th><th>Key</th><th>Health</th><th>Last test</th><th>Last error</th><th>Actions</th></tr></thead>
          <tbody>
            {rows.map((c) => (
              <tr key={`${c.source}-${c.id ?? c.name}`}>
                <td>{c.name}</td>
                <td>{c.source === "api" ? `added (#${c.id})` : "from the channels document"}</td>
                <td>{VENDOR[c.protocol] || c.protocol}</td><td class="what">{c.base_url}</td><td>{(c.models || []).join(", ")}</td>
                <td>{c.priority}</td><td>{c.weight}</td>
                <td>{c.key_last4 ? `…${c.key_last4}` : "set"}</td>
                <td>{health(c)}</td>
                <td class="what">{lastTest(c)}</td>
                <td class="what">{c.last_error && c.last_error !== c.last_probe ? c.last_error : ""}</td>
                <td><div class="actions">
                  <button type="button" onClick={() => test(c)} aria-label={`Test ${c.name}`}>Test</button>
                  <button type="button" onClick={() => toggle(c)}
                    aria-label={`${c.status === 2 ? "Enable" : "Disable"} ${c.name}`}>
                    {c.status === 2 ? "Enable" : "Disable"}
                  </button>
                  {!c.read_only && (
                    <>
                      <button type="button" onClick={() => { setEditing(c); setNote(null); }}
                        aria-label={`Edit ${c.name}`}>Edit</button>
                      {deleting === c.id ? (
                        <button type="button" class="danger" onClick={() => remove(c)}
                          aria-label={`Confirm delete ${c.name}`}>Confirm delete</button>
                      ) : (
                        <button type="button" onClick={() => setDeleting(c.id)}
                          aria-label={`Delete ${c.name}`}>Delete</button>
                      )}
                    </>
                  )}
                </div></td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}
