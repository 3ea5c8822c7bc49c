// The Pricing page: every model the signed-in user may use with its prices after the user's group
// ratio (GET /api/pricing); operators also edit each model's prices (PUT /api/option/ ModelPrice,
// GET /api/admin/prices for the defaults), the group ratios (PUT /api/option/ GroupRatio) and
// move a user to a group (PUT /api/user/).
import { useState } from "preact/hooks";
import { ApiError, call } from "./api.js";
import { Field, FormError, matches, Search } from "./ui.jsx";
import { useLoad } from "./user.jsx";

const COLUMNS = [["input_per_million", "Input / 1M tokens"], ["output_per_million", "Output / 1M tokens"],
  ["cached_input_per_million", "Cached input / 1M"], ["cache_write_per_million", "Cache write / 1M (5 min)"],
  ["cache_write_1h_per_million", "Cache write / 1M (1 h)"], ["per_image", "Per image"], ["per_extra_megapixel", "Per extra megapixel"],
  ["image_input_per_million", "Input images / 1M tokens"], ["per_second", "Per second"], ["per_call", "Per call"],
  ["per_million_characters", "Speech / 1M characters"], ["audio_output_per_million", "Audio out / 1M tokens"],
  ["per_audio_second", "Per audio second"], ["audio_input_per_million", "Audio in / 1M tokens"],
  ["per_search_unit", "Per search unit"], ["rerank_per_million", "Rerank / 1M tokens"],
  ["per_moderation", "Per moderation input"]];

function money(value) {
  if (value === undefined || value === null) return "—";
  return `$${Number(value).toLocaleString("en-US", { maximumFractionDigits: 6 })}`;
}

function PriceTable({ rows: all }) {
  const [query, setQuery] = useState("");
  const rows = all.filter((row) => matches(query, row.model_name, row.kind));
  const shown = COLUMNS.filter(([name]) => rows.some((row) => row[name] !== undefined));
  return (
    <>
    <Search label="Search models" value={query} onInput={setQuery} />
    <div class="table">
      <table aria-label="Prices" class="stack">
        <thead><tr><th>Model</th><th>Kind</th>{shown.map(([, label]) => <th>{label}</th>)}</tr></thead>
        <tbody>
          {rows.map((row) => (
            <tr><td class="title">{row.model_name}</td><td data-label="Kind">{row.kind}</td>
              {shown.map(([name, label]) => <td data-label={label}>{money(row[name])}</td>)}</tr>
          ))}
        </tbody>
      </table>
    </div>
    </>
  );
}

// The page a visitor sees at #/pricing when the operator's PricingAnonymous allows it (the API
// answers the default group's prices without credentials); else the API's refusal and a way in.
export function PublicPricing() {
  const { data, error } = useLoad(() => call("GET", "/api/pricing", { user: null }), []);
  return (
    <main class="public">
      <h1>Pricing</h1>
      {error && <p class="error" role="alert">{error.message}</p>}
      {data && <p>Prices in USD for the default group ({data.group}, × {data.group_ratio}).</p>}
      {data && <PriceTable rows={data.data || []} />}
      <p class="links"><a href="#/">Sign in</a></p>
    </main>
  );
}

export function Pricing({ me }) {
  const [version, setVersion] = useState(0);
  const { data, error } = useLoad(() => call("GET", "/api/pricing"), [version]);
  const rows = (data && data.data) || [];
  return (
    <>
      {error && <p class="error" role="alert">{error.message}</p>}
      {data && (
        <p>Your group: <strong>{data.group}</strong>, prices × {data.group_ratio} (USD).</p>
      )}
      <PriceTable rows={rows} />
      {me.role >= 10 && <ModelPrices onDone={() => setVersion(version + 1)} />}
      {me.role >= 10 && <GroupRatios onDone={() => setVersion(version + 1)} />}
      {me.role >= 10 && <MoveUser onDone={() => setVersion(version + 1)} />}
    </>
  );
}

const SOURCES = { option: "set here (the ModelPrice option)", "channels document": "the channels document",
  shipped: "the gateway's shipped table" };

// The option's entries now (read again before each change, so another model's edit made since
// the page loaded is kept).
async function modelPrices() {
  const answer = await call("GET", "/api/option");
  const option = answer.data.find((o) => o.key === "ModelPrice");
  return option && option.value ? JSON.parse(option.value) : {};
}

function ModelPrices({ onDone }) {
  const [version, setVersion] = useState(0);
  const [model, setModel] = useState("");
  const [done, setDone] = useState(null);
  const { data, error } = useLoad(() => call("GET", "/api/admin/prices"), [version]);
  const rows = (data && data.data) || [];
  const row = rows.find((r) => r.model_name === model.trim());
  return (
    <section aria-label="Model prices">
      <h2>Model prices</h2>
      <p>A model's prices in USD before any group ratio: what you set here wins over the channels
        document and the shipped table; <em>Reset to default</em> goes back to them.</p>
      {error && <p class="error" role="alert">{error.message}</p>}
      <label class="field">
        <span>Model to price</span>
        <input name="model" list="priced-models" value={model}
          onInput={(e) => { setModel(e.currentTarget.value); setDone(null); }}
          autocomplete="off" />
      </label>
      <datalist id="priced-models">{rows.map((r) => <option value={r.model_name} />)}</datalist>
      {model.trim() && data && (
        <PriceEditor key={`${model.trim()}:${version}`} model={model.trim()} row={row}
          onDone={(message) => { setDone(message); setVersion(version + 1); onDone(); }} />
      )}
      {done && <p role="status">{done}</p>}
    </section>
  );
}

function PriceEditor({ model, row, onDone }) {
  const [error, setError] = useState(null);
  const current = (row && row.price) || {};
  const overridden = row && row.source === "option";
  async function change(entry, message) {
    setError(null);
    try {
      const prices = await modelPrices();
      if (entry) prices[model] = entry;
      else delete prices[model];
      await call("PUT", "/api/option", { body: { key: "ModelPrice", value: JSON.stringify(prices) } });
      onDone(message);
    } catch (err) {
      // "value: ModelPrice <model>.<field>: ..." names the field: shown beside it.
      const field = COLUMNS.map(([name]) => name).find((name) => err.message.includes(`ModelPrice ${model}.${name}: `));
      const rule = field && err.message.split(`ModelPrice ${model}.${field}: `)[1];
      setError(field ? new ApiError(rule, err.status, field) : err);
    }
  }
  function save(event) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const entry = {};
    for (const [name] of COLUMNS) {
      const text = String(form.get(name) || "").trim();
      if (text) entry[name] = text;
    }
    change(entry, `Prices of ${model} saved.`);
  }
  return (
    <form onSubmit={save} aria-label={`Prices of ${model}`} class="prices">
      <p>
        {row && row.source ? <>In force: {SOURCES[row.source]}. </> : <>Not priced yet: it cannot be served until it is. </>}
        {row && row.default ? <>Default: {defaultText(row.default)}.</> : <>No default price.</>}
        {row && !row.served && <> No channel serves it yet.</>}
      </p>
      <div class="grid">
        {COLUMNS.map(([name, label]) => (
          <Field label={`${label} (USD)`} name={name} inputmode="decimal" defaultValue={current[name] || ""}
            error={error} />
        ))}
      </div>
      <FormError error={error} fields={COLUMNS.map(([name]) => name)} />
      <button type="submit">Save prices</button>{" "}
      <button type="button" disabled={!overridden} onClick={() => change(null, `${model} is back to its default price.`)}>
        Reset to default
      </button>
    </form>
  );
}

function defaultText(price) {
  const labels = Object.fromEntries(COLUMNS);
  return Object.entries(price).map(([name, value]) => `${labels[name] || name} $${value}`).join(", ");
}

function GroupRatios({ onDone }) {
  const [version, setVersion] = useState(0);
  const [error, setError] = useState(null);
  const [saved, setSaved] = useState(false);
  const { data } = useLoad(() => call("GET", "/api/option"), [version]);
  const option = data && data.data.find((o) => o.key === "GroupRatio");
  const ratios = option ? JSON.parse(option.value) : {};
  async function submit(event) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    const next = {};
    for (const name of Object.keys(ratios)) {
      if (!form.get(`remove:${name}`)) next[name] = Number(form.get(`ratio:${name}`));
    }
    const added = String(form.get("new_group") || "").trim();
    if (added) next[added] = Number(form.get("new_ratio"));
    setError(null);
    setSaved(false);
    try {
      await call("PUT", "/api/option", { body: { key: "GroupRatio", value: JSON.stringify(next) } });
      setSaved(true);
      setVersion(version + 1);
      onDone();
    } catch (err) {
      setError(err);
    }
  }
  return (
    <section aria-label="Group ratios">
      <h2>Group ratios</h2>
      <form onSubmit={submit} aria-label="Edit group ratios" key={option ? option.value : "none"}>
        {Object.entries(ratios).map(([name, ratio]) => (
          <div class="inline">
            <Field label={`Ratio of ${name}`} name={`ratio:${name}`} type="number" step="any" min="0"
              defaultValue={ratio} required />
            <label><input type="checkbox" name={`remove:${name}`} /> Remove {name}</label>
          </div>
        ))}
        <Field label="New group" name="new_group" />
        <Field label="Its ratio" name="new_ratio" type="number" step="any" min="0" />
        <FormError error={error} />
        <button type="submit">Save group ratios</button>
        {saved && <p role="status">Group ratios saved.</p>}
      </form>
    </section>
  );
}

function MoveUser({ onDone }) {
  const [error, setError] = useState(null);
  const [moved, setMoved] = useState(null);
  async function submit(event) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    setError(null);
    setMoved(null);
    try {
      const answer = await call("PUT", "/api/user", { body: { id: Number(form.get("id")), group: form.get("group") } });
      setMoved(answer.data);
      onDone();
    } catch (err) {
      setError(err);
    }
  }
  return (
    <section aria-label="Move a user">
      <h2>Move a user to a group</h2>
      <form class="inline" onSubmit={submit} aria-label="Move a user to a group">
        <Field label="User id" name="id" type="number" min="1" required error={error} />
        <Field label="Group" name="group" required error={error} />
        <FormError error={error} fields={["id", "group"]} />
        <button type="submit">Move user</button>
      </form>
      {moved && <p role="status">{moved.username} is now in {moved.group}.</p>}
    </section>
  );
}
