// Form parts: a labelled field whose error (from the API) appears next to it, and the form's
// own error when the API names no field of the form. The error sits outside the <label>, so the
// field's accessible name is its label alone; the error is its description.
export function Field({ label, name, error, ...input }) {
  const said = problemOf(error, name);
  return (
    <div class="field">
      <label>
        <span>{label}</span>
        <input name={name} aria-invalid={said ? "true" : undefined}
          aria-describedby={said ? `${name}-error` : undefined} {...input} />
      </label>
      {said && <span class="error" id={`${name}-error`} role="alert">{said}</span>}
    </div>
  );
}

// Every problem of an error: the API's list for a form's 400 (each field's at once), else the one
// its message names.
function problems(error) {
  if (!error) return [];
  if (error.problems && error.problems.length) return error.problems;
  return [{ param: error.param || null, message: error.message }];
}

// The field a problem belongs to: "models[0]" and "model_map.alias" are the models and model_map boxes.
const fieldOf = (param) => String(param || "").replace(/[.[].*$/, "");

/** The problem the API names for the field `name`, in words (null: none). */
export function problemOf(error, name) {
  const found = problems(error).find((problem) => problem.param && fieldOf(problem.param) === name);
  return found ? inWords(found.message, name) : null;
}

// The API's message for scripts ("password: String should match ...") as a person reads it beside
// its field: the field's internal name dropped (the label says which), pydantic's phrases in words.
// Under a form, a field the form does not show is named in words (NAMES) instead.
const NAMES = { end_timestamp: "the end (To)", start_timestamp: "the start (From)",
  original_password: "the current password", password2: "the repeated password", aff_quota: "",
  remain_quota: "the key's quota", expired_time: "the expiry", model_limits: "the models" };

export function inWords(message, name) {
  let text = String(message || "").replace(new RegExp(`^${name}([.[][^:]*)?: `), "");
  text = text.replace(/ \(and \d+ more problems?\)$/, "");
  text = text.replace(/^String should match pattern '\^\[A-Za-z0-9_.@-\]\{1,(\d+)\}\$'/,
    "use letters, digits and _ . @ - only, at most $1 characters");
  for (const [internal, words] of Object.entries(NAMES)) text = text.replaceAll(internal, words);
  text = text.replace(/\s*\(\)/g, "").replace(/^: /, "");
  text = text.replace(/^String should have at least (\d+) characters?/, "at least $1 characters");
  text = text.replace(/^String should have at most (\d+) characters?/, "at most $1 characters");
  text = text.replace(/^Input should be a valid integer.*/, "must be a whole number");
  text = text.replace(/^Input should be a valid URL.*/, "must be a web address (https://...)");
  text = text.replace(/^List should have at least (\d+) items?.*/, "give at least $1");
  text = text.replace(/^Input should be greater than or equal to (\S+)/, "must be at least $1");
  text = text.replace(/^Input should be less than or equal to (\S+)/, "must be at most $1");
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** The problems no field of the form shows (`fields`: the form's own), under the form. */
export function FormError({ error, fields = [] }) {
  const rest = problems(error).filter((problem) => !(problem.param && fields.includes(fieldOf(problem.param))));
  if (!rest.length) return null;
  return (
    <div class="error" role="alert">
      {rest.map((problem) => <p>{fields.length ? inWords(problem.message, "") : problem.message}</p>)}
    </div>
  );
}

// On a phone every table is one card per row (style.css), each value after its column's name: the
// cells are labelled from the table's header as they appear (a page sets its own label, or marks
// the row's title with class "title"). A table wider than its box says it scrolls sideways (its box
// a named, focusable region, as a scrolled box should be). One observer for every page, so a
// table needs no markup of its own.
export function labelCells(root) {
  const label = () => {
    for (const box of root.querySelectorAll(".table")) {
      const table = box.querySelector("table");
      const scrolls = table && box.scrollWidth > box.clientWidth + 1;
      if (scrolls === box.hasAttribute("data-scrolls")) continue;
      if (scrolls) {
        box.setAttribute("data-scrolls", "");
        box.setAttribute("role", "region");
        box.setAttribute("tabindex", "0");
        box.setAttribute("aria-label", `${table.getAttribute("aria-label") || "Table"}, scrolls sideways`);
      } else {
        for (const name of ["data-scrolls", "role", "tabindex", "aria-label"]) box.removeAttribute(name);
      }
    }
    for (const table of root.querySelectorAll(".table table")) {
      const names = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
      for (const row of table.querySelectorAll("tbody tr")) {
        [...row.children].forEach((cell, n) => {
          if (!cell.hasAttribute("data-label") && !cell.classList.contains("title") && names[n]) {
            cell.setAttribute("data-label", names[n]);
          }
        });
      }
    }
  };
  const observer = new MutationObserver(label);
  observer.observe(root, { childList: true, subtree: true });
  window.addEventListener("resize", label);
  label();
  return () => { observer.disconnect(); window.removeEventListener("resize", label); };
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
  const said = problemOf(error, name);
  return (
    <div class="field">
      <label>
        <span>{label}</span>
        <select name={name} aria-invalid={said ? "true" : undefined} aria-describedby={said ? `${name}-error` : undefined}>
          <option value="">all</option>
          {options.map((option) => <option value={option}>{option}</option>)}
        </select>
      </label>
      {said && <span class="error" id={`${name}-error`} role="alert">{said}</span>}
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
