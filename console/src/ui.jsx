// Form parts: a labelled field whose error (from the API) appears next to it, and the form's
// own error when the API names no field of the form. The error sits outside the <label>, so the
// field's accessible name is its label alone; the error is its description.
export function Field({ label, name, error, ...input }) {
  const mine = error && error.param === name;
  return (
    <div class="field">
      <label>
        <span>{label}</span>
        <input name={name} aria-invalid={mine ? "true" : undefined}
          aria-describedby={mine ? `${name}-error` : undefined} {...input} />
      </label>
      {mine && <span class="error" id={`${name}-error`} role="alert">{inWords(error.message, name)}</span>}
    </div>
  );
}

// The API's message for scripts ("password: String should match ...") as a person reads it beside
// its field: the field's internal name dropped (the label says which), pydantic's phrases in words.
const NAMES = { end_timestamp: "the end (To)", start_timestamp: "the start (From)",
  original_password: "the current password", aff_quota: "" };

export function inWords(message, name) {
  let text = String(message || "").replace(new RegExp(`^${name}(\\.[\\w.]+)?: `), "");
  text = text.replace(/^String should match pattern '\^\[A-Za-z0-9_.@-\]\{1,(\d+)\}\$'/,
    "use letters, digits and _ . @ - only, at most $1 characters");
  for (const [internal, words] of Object.entries(NAMES)) text = text.replaceAll(internal, words);
  text = text.replace(/\s*\(\)/g, "");
  text = text.replace(/^String should have at least (\d+) characters?/, "at least $1 characters");
  text = text.replace(/^String should have at most (\d+) characters?/, "at most $1 characters");
  return text.charAt(0).toUpperCase() + text.slice(1);
}

export function FormError({ error, fields = [] }) {
  if (!error) return null;
  if (error.param && fields.includes(error.param)) return null;
  return <p class="error" role="alert">{error.message}</p>;
}

export function Pager({ onNext, onFirst, hasNext, hasPrevious }) {
  return (
    <div class="pager">
      <button type="button" onClick={onFirst} disabled={!hasPrevious}>First page</button>
      <button type="button" onClick={onNext} disabled={!hasNext}>Next page</button>
    </div>
  );
}

// A labelled choice of values ("all" first), with the API's error about it next to it.
export function Choice({ label, name, options, error }) {
  const mine = error && error.param === name;
  return (
    <div class="field">
      <label>
        <span>{label}</span>
        <select name={name} aria-invalid={mine ? "true" : undefined} aria-describedby={mine ? `${name}-error` : undefined}>
          <option value="">all</option>
          {options.map((option) => <option value={option}>{option}</option>)}
        </select>
      </label>
      {mine && <span class="error" id={`${name}-error`} role="alert">{error.message}</span>}
    </div>
  );
}

// A search over the rows a page has loaded (new-api's list searches): rows whose text has the words.
export function Search({ label, value, onInput }) {
  return (
    <div class="field search">
      <label><span>{label}</span>
        <input type="search" value={value} onInput={(e) => onInput(e.currentTarget.value)} autocomplete="off" />
      </label>
    </div>
  );
}

export function matches(query, ...texts) {
  const words = String(query || "").toLowerCase().split(/\s+/).filter(Boolean);
  const text = texts.join(" ").toLowerCase();
  return words.every((word) => text.includes(word));
}
