import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { call, forget, onOtherTab, remember, who } from "./api.js";
import { Keys } from "./keys.jsx";
import { Account, Dashboard, Log } from "./user.jsx";
import { Tasks } from "./tasks.jsx";
import { Spend, Users } from "./operator.jsx";
import { Channels } from "./channels.jsx";
import { Forgot, Reset, SignUp, useStatus } from "./signup.jsx";
import { Invite, TopUp } from "./topup.jsx";
import { AllOrders, Codes, Settings } from "./commerce.jsx";
import { Pricing, PublicPricing } from "./pricing.jsx";
import { Usage } from "./usage.jsx";
import { Playground } from "./playground.jsx";
import { Field, FormError, labelCells } from "./ui.jsx";
import "./style.css";

const USER_PAGES = [["dashboard", "Dashboard", Dashboard], ["keys", "Keys", Keys], ["log", "Request log", Log],
  ["tasks", "Tasks", Tasks], ["playground", "Playground", Playground], ["usage", "Usage", Usage], ["pricing", "Pricing", Pricing], ["topup", "Top up", TopUp],
  ["invite", "Invite", Invite], ["account", "Account", Account]];
const OPERATOR_PAGES = [["users", "Users", Users], ["channels", "Channels", Channels], ["spend", "Spend", Spend],
  ["codes", "Redemption codes", Codes], ["orders", "Orders", AllOrders], ["settings", "Site settings", Settings]];
const PUBLIC_PAGES = { register: SignUp, forgot: Forgot, reset: Reset };

function route() {
  const hash = window.location.hash.replace(/^#\/?/, "").split("?")[0];
  // Back from Stripe's payment page (?topup=success&order=...): the Top up page shows the order.
  if (!hash && new URLSearchParams(window.location.search).get("topup")) return "topup";
  return hash || "dashboard";
}

function SignIn({ onIn }) {
  const { data: status } = useStatus();
  const [mode, setMode] = useState("password");
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  async function submit(event) {
    event.preventDefault();
    const form = new FormData(event.currentTarget);
    setBusy(true);
    setError(null);
    try {
      if (mode === "password") {
        const answer = await call("POST", "/api/user/login",
          { body: { username: form.get("username"), password: form.get("password") }, user: null });
        remember(answer.data.id, null);
      } else {
        const user = { id: String(form.get("user_id")).trim(), token: String(form.get("access_token")).trim() };
        await call("GET", "/api/user/self", { user });
        remember(user.id, user.token);
      }
      onIn();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }
  return (
    <main class="signin">
      <h1>{(status && status.system_name) || "Gateway console"}</h1>
      {status && status.notice && <p class="notice">{status.notice}</p>}
      <form onSubmit={submit} aria-label="Sign in">
        {mode === "password" ? (
          <>
            <Field label="Username" name="username" autocomplete="username" required error={error} />
            <Field label="Password" name="password" type="password" autocomplete="current-password" required
              error={error} />
          </>
        ) : (
          <>
            <Field label="User id" name="user_id" inputmode="numeric" required error={error} />
            <Field label="Access token" name="access_token" type="password" required error={error} />
          </>
        )}
        <FormError error={error} fields={["username", "password", "user_id", "access_token"]} />
        <button type="submit" disabled={busy}>Sign in</button>
        <button type="button" class="link" onClick={() => { setError(null); setMode(mode === "password" ? "token" : "password"); }}>
          {mode === "password" ? "Use an access token instead" : "Use a username and password instead"}
        </button>
      </form>
      <p class="links">
        <a href="#/forgot">Forgot password?</a>
        {status && status.pricing_anonymous && <a href="#/pricing">Pricing</a>}
        {status && status.register_enabled && status.password_register_enabled && <a href="#/register">Sign up</a>}
      </p>
    </main>
  );
}

function App() {
  const [me, setMe] = useState(null);
  const [checked, setChecked] = useState(false);
  const [page, setPage] = useState(route());
  const [menu, setMenu] = useState(false);

  async function load() {
    if (!who()) {
      setMe(null);
      setChecked(true);
      return;
    }
    try {
      setMe((await call("GET", "/api/user/self")).data);
    } catch {
      forget();
      setMe(null);
    }
    setChecked(true);
  }
  useEffect(() => {
    load();
    const onHash = () => { setPage(route()); setMenu(false); };
    window.addEventListener("hashchange", onHash);
    const stop = onOtherTab(load);  // signed in or out in another tab: this one follows
    return () => { window.removeEventListener("hashchange", onHash); stop(); };
  }, []);
  useEffect(() => {
    if (!menu) return undefined;
    const onKey = (event) => {
      if (event.key !== "Escape") return;
      setMenu(false);
      document.querySelector("button.menu")?.focus();
    };
    document.addEventListener("keydown", onKey);
    return () => document.removeEventListener("keydown", onKey);
  }, [menu]);

  async function signOut() {
    try {
      await call("POST", "/api/user/logout", { body: {} });
    } finally {
      forget();
      setMe(null);
    }
  }

  if (!checked) return <p class="loading">Loading…</p>;
  if (!me) {
    const Public = PUBLIC_PAGES[page];
    if (page === "pricing") return <PublicPricing />;  // shown when the operator's PricingAnonymous allows
    return Public ? <Public onIn={load} /> : <SignIn onIn={load} />;
  }
  const pages = me.role >= 10 ? [...USER_PAGES, ...OPERATOR_PAGES] : USER_PAGES;
  const found = pages.find(([name]) => name === page) || pages[0];
  const Page = found[2];
  return (
    <div class="shell">
      <header>
        <span class="brand">Gateway console</span>
        <button type="button" class="menu" aria-expanded={menu} aria-controls="nav" onClick={() => setMenu(!menu)}>Menu</button>
        <nav id="nav" aria-label="Console" class={menu ? "open" : ""}>
          {pages.map(([name, label]) => (
            <a href={`#/${name}`} aria-current={name === found[0] ? "page" : undefined}>{label}</a>
          ))}
        </nav>
        <span class="who">{me.display_name || me.username} (#{me.id})</span>
        <button type="button" onClick={signOut}>Sign out</button>
      </header>
      <main>
        <h1>{found[1]}</h1>
        <Page me={me} reload={load} />
      </main>
    </div>
  );
}

const app = document.getElementById("app");
labelCells(app);
render(<App />, app);
