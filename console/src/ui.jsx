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
      {mine && <span class="error" id={`${name}-error`} role="alert">{error.message}</span>}
    </div>
  );
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
