// Try a model with a key, as a script would: POST {API base URL}/chat/completions with the key in
// Authorization (new-api's playground). The key is the user's to paste; the page keeps it nowhere.
import { useState } from "preact/hooks";
import { API_BASE, call } from "./api.js";
import { useLoad } from "./user.jsx";

export function Playground() {
  const { data: pricing } = useLoad(() => call("GET", "/api/pricing"), []);
  const models = ((pricing && pricing.data) || []).filter((row) => row.kind === "text").map((row) => row.model_name);
  const [answer, setAnswer] = useState(null);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  async function submit(event) {
    event.preventDefault();
    const f = new FormData(event.currentTarget);
    setError(null);
    setAnswer(null);
    setBusy(true);
    try {
      const response = await fetch(`${API_BASE}/chat/completions`, {
        method: "POST",
        headers: { "Content-Type": "application/json", Authorization: `Bearer ${String(f.get("key")).trim()}` },
        body: JSON.stringify({ model: f.get("model"), messages: [{ role: "user", content: f.get("prompt") }] }),
      });
      const body = await response.json().catch(() => null);
      if (!response.ok) throw new Error((body && body.error && body.error.message) || `HTTP ${response.status}`);
      setAnswer(body);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }
  const usage = answer && answer.usage;
  return (
    <>
      <form class="card" onSubmit={submit} aria-label="Try a model">
        <div class="field"><label><span>API key</span>
          <input name="key" type="password" required autocomplete="off" placeholder="sk-…" /></label></div>
        <div class="field"><label><span>Model</span>
          <input name="model" list="playground-models" required defaultValue={models[0] || ""} autocomplete="off" />
        </label></div>
        <datalist id="playground-models">{models.map((m) => <option value={m} />)}</datalist>
        <div class="field"><label><span>Message</span>
          <textarea name="prompt" rows={4} required /></label></div>
        <button type="submit" disabled={busy}>Send</button>
        <p class="note">Billed to the key like any request (see the Request log).</p>
      </form>
      {error && <p class="error" role="alert">{error.message}</p>}
      {answer && (
        <section class="card" aria-label="The answer">
          <p class="answer">{answer.choices && answer.choices[0] && answer.choices[0].message.content}</p>
          {usage && <p class="note">{usage.prompt_tokens} tokens in, {usage.completion_tokens} out; model {answer.model}</p>}
        </section>
      )}
    </>
  );
}
