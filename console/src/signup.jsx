// The pages of someone not signed in: sign up (new-api's /api/user/register, with the emailed code
// of /api/verification when the operator asks for one), forgot password (/api/reset_password) and
// the reset page its emailed link opens (/api/user/reset). Every rule is the API's: the pages only
// show what /api/status says and what the API answers.
import { useState } from "preact/hooks";
import { call, remember } from "./api.js";
import { Field, FormError } from "./ui.jsx";
import { useLoad } from "./user.jsx";

// The parameters after the hash route: "#/register?aff=CODE" gives {aff: "CODE"}.
export function hashParams() {
  const hash = window.location.hash;
  const at = hash.indexOf("?");
  return new URLSearchParams(at < 0 ? "" : hash.slice(at + 1));
}

export function useStatus() {
  return useLoad(() => call("GET", "/api/status", { user: null }).then((answer) => answer.data), []);
}

export function SignUp({ onIn }) {
  const { data: status, error: statusError } = useStatus();
  const [error, setError] = useState(null);
  const [sent, setSent] = useState(null);
  const [busy, setBusy] = useState(false);
  const aff = hashParams().get("aff") || "";

  async function sendCode(event) {
    const form = event.currentTarget.form;
    const email = String(new FormData(form).get("email") || "").trim();
    setError(null);
    setSent(null);
    try {
      await call("GET", "/api/verification", { query: { email }, user: null });
      setSent(email);
    } catch (err) {
      setError(err);
    }
  }

  async function submit(event) {
    event.preventDefault();
    const f = new FormData(event.currentTarget);
    const body = {
      username: String(f.get("username") || ""), password: String(f.get("password") || ""),
      password2: String(f.get("password2") || ""), email: String(f.get("email") || "").trim(),
      verification_code: String(f.get("verification_code") || "").trim(),
      aff_code: String(f.get("aff_code") || "").trim(),
    };
    setBusy(true);
    setError(null);
    try {
      await call("POST", "/api/user/register", { body, user: null });
      const answer = await call("POST", "/api/user/login",
        { body: { username: body.username, password: body.password }, user: null });
      remember(answer.data.id, null);
      window.location.hash = "#/dashboard";
      onIn();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  const open = status && status.register_enabled && status.password_register_enabled;
  return (
    <main class="signin">
      <h1>Sign up</h1>
      {statusError && <p class="error" role="alert">{statusError.message}</p>}
      {status && !open && <p role="status">Sign-up is closed on this gateway; ask its operator for an account.</p>}
      {open && (
        <form onSubmit={submit} aria-label="Sign up">
          <Field label="Username" name="username" autocomplete="username" required maxLength={64} error={error} />
          <Field label="Password" name="password" type="password" autocomplete="new-password" required error={error} />
          <Field label="Repeat password" name="password2" type="password" autocomplete="new-password" required
            error={error} />
          <Field label={status.email_verification ? "Email" : "Email (optional)"} name="email" type="email"
            autocomplete="email" error={error} />
          {status.email_verification && (
            <>
              <button type="button" class="secondary" onClick={sendCode}>Send code</button>
              {sent && <p role="status">A code was sent to {sent}. It is valid for 10 minutes.</p>}
              <Field label="Verification code" name="verification_code" inputmode="numeric" autocomplete="one-time-code"
                error={error} />
            </>
          )}
          <Field label="Invitation code (optional)" name="aff_code" defaultValue={aff} error={error} />
          <FormError error={error}
            fields={["username", "password", "password2", "email", "verification_code", "aff_code"]} />
          <button type="submit" disabled={busy}>Sign up</button>
        </form>
      )}
      <p><a href="#/">I have an account: sign in</a></p>
    </main>
  );
}

export function Forgot() {
  const [error, setError] = useState(null);
  const [sent, setSent] = useState(null);
  async function submit(event) {
    event.preventDefault();
    const email = String(new FormData(event.currentTarget).get("email") || "").trim();
    setError(null);
    setSent(null);
    try {
      await call("GET", "/api/reset_password", { query: { email }, user: null });
      setSent(email);
    } catch (err) {
      setError(err);
    }
  }
  return (
    <main class="signin">
      <h1>Forgot password</h1>
      <form onSubmit={submit} aria-label="Reset password by email">
        <p class="note">We send a link to reset the password to the account's verified address.</p>
        <Field label="Email" name="email" type="email" autocomplete="email" required error={error} />
        <FormError error={error} fields={["email"]} />
        {sent && <p role="status">A message is on its way to {sent}. Open its link within 10 minutes.</p>}
        <button type="submit">Send reset link</button>
      </form>
      <p><a href="#/">Back to sign in</a></p>
    </main>
  );
}

export function Reset() {
  const params = hashParams();
  const email = params.get("email") || "";
  const token = params.get("token") || "";
  const [error, setError] = useState(null);
  const [password, setPassword] = useState(null);
  const [copied, setCopied] = useState(false);
  async function submit(event) {
    event.preventDefault();
    setError(null);
    try {
      setPassword((await call("POST", "/api/user/reset", { body: { email, token }, user: null })).data);
    } catch (err) {
      setError(err);
    }
  }
  async function copy() {
    await navigator.clipboard.writeText(password);
    setCopied(true);
  }
  return (
    <main class="signin">
      <h1>Reset password</h1>
      {password ? (
        <section class="secret" aria-label="New password">
          <p>The new password of {email}. It is shown only now: copy it, sign in, and change it on the Account page.</p>
          <code aria-label="The new password">{password}</code>
          <div class="row">
            <button type="button" onClick={copy}>Copy</button>
            {copied && <span role="status">Copied.</span>}
          </div>
        </section>
      ) : (
        <form onSubmit={submit} aria-label="Reset password">
          <p>Set a new random password for <strong>{email || "(no address in the link)"}</strong>.</p>
          <FormError error={error} />
          <button type="submit">Reset password</button>
        </form>
      )}
      <p><a href="#/">Sign in</a></p>
    </main>
  );
}
