// The console's one way to the gateway: the same JSON API a script uses. Every call names the
// user in X-Api-User (the gateway's CSRF guard for the session cookie); a sign-in with the
// access token sends it in Authorization instead of the cookie.
//
// A password sign-in's session is the browser's (its HttpOnly cookie), so the user's id is kept in
// local storage: every tab of the browser is signed in, as new-api's console is. The id is not a
// secret (the cookie is, and a page cannot read it). An access token is a secret: it stays in the
// tab that was given it (session storage), with its user id.
export const UNITS_PER_USD = 500000;
const base = new URL("../", window.location.href);
const tab = window.sessionStorage;
const browser = window.localStorage;

/** Where API requests go: the gateway this console is served by (its stage too, if any). */
export const API_BASE = new URL("v1", base).href;
export const DOCS_URL = new URL("docs", base).href;

export class ApiError extends Error {
  // `problems`: every field's problem ({param, message}) when the API lists them (a form's 400).
  constructor(message, status, param, problems = []) {
    super(message);
    this.status = status;
    this.param = param;
    this.problems = problems;
  }
}

export function who() {
  const token = tab.getItem("gateway.token");
  if (token) return { id: tab.getItem("gateway.user"), token };
  const id = browser.getItem("gateway.user");
  return id ? { id, token: null } : null;
}

export function remember(id, token) {
  if (token) {
    tab.setItem("gateway.user", String(id));
    tab.setItem("gateway.token", token);
  } else {
    browser.setItem("gateway.user", String(id));
    tab.removeItem("gateway.user");
    tab.removeItem("gateway.token");
  }
}

export function forget() {
  tab.removeItem("gateway.user");
  tab.removeItem("gateway.token");
  browser.removeItem("gateway.user");
}

/** Calls `then` when another tab signs in or out (the storage event fires in the other tabs only). */
export function onOtherTab(then) {
  const listener = (event) => { if (event.key === "gateway.user") then(); };
  window.addEventListener("storage", listener);
  return () => window.removeEventListener("storage", listener);
}

export async function call(method, path, { body, query, user } = {}) {
  const url = new URL(path.replace(/^\//, ""), base);
  for (const [name, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
  }
  const caller = user || who();
  const headers = { Accept: "application/json" };
  if (caller) headers["X-Api-User"] = caller.id;
  if (caller && caller.token) headers.Authorization = caller.token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const answer = await fetch(url, {
    method, headers, credentials: "same-origin", body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try {
    data = await answer.json();
  } catch {
    throw new ApiError(`the gateway answered ${answer.status} without JSON`, answer.status);
  }
  if (!answer.ok || data.success === false) {
    const message = data.message || (data.error && data.error.message) || `HTTP ${answer.status}`;
    const problems = Array.isArray(data.errors) ? data.errors : [];
    const param = (problems[0] && problems[0].param) || (data.error && data.error.param) || paramOf(message);
    throw new ApiError(message, answer.status, param, problems);
  }
  return data;
}

// The account envelope has no param field: its message starts with the field it names.
function paramOf(message) {
  const found = /^([a-z_][a-z_0-9]*)([.[][^:]*)?: /.exec(message || "");
  return found ? found[1] : null;
}

/** A role as the forms name it (new-api's numbers: 1 user, 10 operator, 100 root). */
export function roleName(role) {
  return role >= 100 ? "root" : role >= 10 ? "operator" : "user";
}

export function usd(units) {
  const value = Number(units || 0) / UNITS_PER_USD;
  return `$${value.toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: value < 1 ? 6 : 2 })}`;
}

export function when(seconds) {
  if (!seconds) return "never";
  return new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

// A non-JSON answer (the request log's CSV export), with the same credentials as `call`.
export async function fetchText(path, query) {
  const url = new URL(path.replace(/^\//, ""), base);
  for (const [name, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") url.searchParams.set(name, value);
  }
  const caller = who();
  const headers = {};
  if (caller) headers["X-Api-User"] = caller.id;
  if (caller && caller.token) headers.Authorization = caller.token;
  const answer = await fetch(url, { headers, credentials: "same-origin" });
  if (!answer.ok) {
    let message = `HTTP ${answer.status}`;
    try {
      message = (await answer.json()).message || message;
    } catch { /* not JSON */ }
    throw new ApiError(message, answer.status, paramOf(message));
  }
  return { text: await answer.text(), truncated: answer.headers.get("X-Export-Truncated") === "true" };
}
