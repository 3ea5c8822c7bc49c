// A user's money in: redeem a code (POST /api/user/topup), pay by card through Stripe Checkout
// (POST /api/user/pay, then Stripe's page; back here with ?topup=success&order=...), the user's
// orders (GET /api/user/topup/self); and invitations (GET /api/user/aff, POST /api/user/aff_transfer).
import { useEffect, useRef, useState } from "preact/hooks";
import { call, UNITS_PER_USD, usd, when } from "./api.js";
import { Field, FormError, Pager } from "./ui.jsx";
import { useLoad } from "./user.jsx";
import { useStatus } from "./signup.jsx";

const ORDER_STATUS = { pending: "pending (waiting for the payment)", success: "paid", expired: "expired",
  cancelled: "cancelled" };

// A pending order's way on: pay at the same Stripe page while its session is open (Stripe expires it
// at `expires_at`), or cancel it (the session is expired at Stripe first; POST /api/user/pay/cancel).
function OrderActions({ order, onChanged }) {
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const open = order.status === "pending" && order.pay_link && order.expires_at * 1000 > Date.now();
  if (order.status !== "pending") return null;
  async function cancel() {
    setError(null);
    setBusy(true);
    try {
      await call("POST", "/api/user/pay/cancel", { body: { trade_no: order.trade_no } });
    } catch (err) {
      setError(err);
    }
    setBusy(false);
    onChanged();
  }
  return (
    <div class="actions">
      {open && <a class="button" href={order.pay_link} aria-label={`Resume payment of order ${order.trade_no}`}>Resume payment</a>}
      <button type="button" class="secondary" disabled={busy} aria-label={`Cancel order ${order.trade_no}`}
        onClick={cancel}>Cancel order</button>
      {error && <span class="error" role="alert">{error.message}</span>}
    </div>
  );
}

function Redeem({ onDone }) {
  const [error, setError] = useState(null);
  const [added, setAdded] = useState(null);
  async function submit(event) {
    event.preventDefault();
    const form = event.currentTarget;
    setError(null);
    setAdded(null);
    try {
      const answer = await call("POST", "/api/user/topup", { body: { key: String(new FormData(form).get("key")).trim() } });
      setAdded(answer.data);
      form.reset();
      onDone();
    } catch (err) {
      setError(err);
    }
  }
  return (
    <form class="card" onSubmit={submit} aria-label="Redeem a code">
      <h2>Redeem a code</h2>
      <Field label="Redemption code" name="key" required autocomplete="off" error={error} />
      <FormError error={error} fields={["key"]} />
      {added !== null && <p role="status">Added {usd(added)} ({added.toLocaleString("en-US")} units).</p>}
      <button type="submit">Redeem</button>
    </form>
  );
}

// Preset amounts (new-api's top-up page offers a row of them); the smallest the operator allows and up.
const PRESETS = [5, 10, 20, 50, 100];

function PayByCard({ status }) {
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);
  const [amount, setAmount] = useState("");
  const least = Number((status && status.stripe_min_topup) || 1);
  const presets = [...new Set([least, ...PRESETS.filter((n) => n > least)])].slice(0, 5);
  async function submit(event) {
    event.preventDefault();
    const amount = Number(String(new FormData(event.currentTarget).get("amount") || "").trim());
    setError(null);
    setBusy(true);
    try {
      const answer = await call("POST", "/api/user/pay", { body: { amount, payment_method: "stripe" } });
      window.location.assign(answer.data.pay_link);
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  }
  return (
    <form class="card" onSubmit={submit} aria-label="Pay by card">
      <h2>Pay by card</h2>
      {status && (
        <p class="note">
          1 USD of quota costs ${status.stripe_unit_price}; the smallest top-up is {status.stripe_min_topup} USD.
          The payment page is Stripe Checkout's.
        </p>
      )}
      <div class="row" role="group" aria-label="Preset amounts">
        {presets.map((n) => (
          <button type="button" class="secondary" aria-pressed={String(amount) === String(n)}
            onClick={() => setAmount(String(n))}>{`$${n}`}</button>
        ))}
      </div>
      <Field label="Amount (USD of quota)" name="amount" type="number" min="1" step="1" required error={error}
        value={amount} onInput={(e) => setAmount(e.currentTarget.value)} />
      <FormError error={error} fields={["amount"]} />
      <button type="submit" disabled={busy}>Pay by card</button>
    </form>
  );
}

// Back from Stripe's page: the order named in ?order=, read until the webhook has settled it.
function Returned({ onPaid, onChanged, tick }) {
  const params = new URLSearchParams(window.location.search);
  const outcome = params.get("topup");
  const tradeNo = params.get("order");
  const [order, setOrder] = useState(null);
  const [error, setError] = useState(null);
  const credited = useRef(false);
  useEffect(() => {
    if (!tradeNo) return undefined;
    let live = true;
    let tries = 0;
    async function look() {
      try {
        const answer = await call("GET", "/api/user/topup/self", { query: { page_size: 100 } });
        const found = answer.data.items.find((item) => item.trade_no === tradeNo) || null;
        if (!live) return;
        setOrder(found);
        if (found && found.status === "success" && !credited.current) {
          credited.current = true;
          onPaid();
        }
        if (found && found.status === "pending" && outcome === "success" && ++tries < 30) setTimeout(look, 2000);
      } catch (err) {
        if (live) setError(err);
      }
    }
    look();
    return () => { live = false; };
  }, [tradeNo, tick]);
  if (!tradeNo) return null;
  function dismiss() {
    window.history.replaceState(null, "", window.location.pathname + window.location.hash);
    setOrder(undefined);
  }
  if (order === undefined) return null;
  return (
    <section class="card" aria-label="Your payment">
      {error && <p class="error" role="alert">{error.message}</p>}
      {outcome === "cancelled" && <p>You left the payment page; order {tradeNo} was not paid.</p>}
      {order && (
        <p role="status">
          Order {order.trade_no} ({order.amount} USD of quota): {ORDER_STATUS[order.status] || order.status}
          {order.status === "success" && `; ${usd(order.units)} added to your balance`}
          {order.status === "pending" && order.expires_at > 0 && `; the payment page is open until ${when(order.expires_at)}`}.
        </p>
      )}
      {order && <OrderActions order={order} onChanged={onChanged} />}
      {!order && !error && <p>Looking for order {tradeNo}…</p>}
      <button type="button" class="link" onClick={dismiss}>Dismiss</button>
    </section>
  );
}

function Orders({ tick, onChanged }) {
  const [page, setPage] = useState(1);
  const { data, error } = useLoad(() => call("GET", "/api/user/topup/self", { query: { p: page, page_size: 20 } }),
    [page, tick]);
  const items = (data && data.data.items) || [];
  return (
    <>
      <h2>Your orders</h2>
      {error && <p class="error" role="alert">{error.message}</p>}
      <div class="table">
        <table aria-label="Your orders">
          <thead><tr><th>Order</th><th>Created</th><th>Amount</th><th>Charged</th><th>Quota</th><th>Status</th><th>Paid</th><th>Pay by</th><th>Actions</th></tr></thead>
          <tbody>
            {items.map((o) => (
              <tr key={o.trade_no}>
                <td><code>{o.trade_no}</code></td><td>{when(o.created_at)}</td><td>{o.amount} USD</td>
                <td>{(o.money_cents / 100).toFixed(2)} {String(o.currency || "").toUpperCase()}</td>
                <td>{usd(o.units)}</td><td>{ORDER_STATUS[o.status] || o.status}</td><td>{when(o.paid_at)}</td>
                <td>{o.status === "pending" && o.expires_at ? when(o.expires_at) : ""}</td>
                <td><OrderActions order={o} onChanged={onChanged} /></td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {data && !items.length && <p>No orders yet.</p>}
      <Pager hasPrevious={page > 1} hasNext={Boolean(data && data.data.has_more)} onFirst={() => setPage(1)}
        onNext={() => setPage(page + 1)} />
    </>
  );
}

export function TopUp({ me, reload }) {
  const { data: status } = useStatus();
  const [tick, setTick] = useState(0);
  const refresh = () => { setTick((n) => n + 1); reload(); };
  return (
    <>
      <dl class="cards">
        <div><dt>Balance</dt><dd>{usd(me.quota)}</dd><dd class="units">{me.quota.toLocaleString("en-US")} units</dd></div>
      </dl>
      <Returned onPaid={refresh} onChanged={refresh} tick={tick} />
      <div class="row top">
        <PayByCard status={status} />
        <Redeem onDone={refresh} />
      </div>
      <Orders tick={tick} onChanged={refresh} />
    </>
  );
}

export function Invite({ me, reload }) {
  const { data, error: loadError } = useLoad(() => call("GET", "/api/user/aff"), []);
  const [error, setError] = useState(null);
  const [moved, setMoved] = useState(null);
  const [copied, setCopied] = useState(false);
  const link = data ? `${new URL("./", window.location.href).href}#/register?aff=${encodeURIComponent(data.data)}` : "";
  async function copy() {
    await navigator.clipboard.writeText(link);
    setCopied(true);
  }
  async function transfer(event) {
    event.preventDefault();
    const form = event.currentTarget;
    const amount = Number(String(new FormData(form).get("quota") || "").trim());
    setError(null);
    setMoved(null);
    try {
      const answer = await call("POST", "/api/user/aff_transfer", { body: { quota: Math.round(amount * UNITS_PER_USD) } });
      setMoved(answer.data);
      form.reset();
      reload();
    } catch (err) {
      setError(err);
    }
  }
  return (
    <>
      {loadError && <p class="error" role="alert">{loadError.message}</p>}
      <section class="card secret" aria-label="Your invitation link">
        <p>Whoever signs up with this link is your invitee. You earn a reward when an invitee first pays.</p>
        {link ? <code aria-label="The invitation link">{link}</code> : <p>Loading…</p>}
        <div class="row">
          <button type="button" onClick={copy} disabled={!link}>Copy link</button>
          {copied && <span role="status">Copied.</span>}
        </div>
      </section>
      <dl class="cards" aria-label="Invitation rewards">
        <div><dt>Invited</dt><dd>{(me.aff_count || 0).toLocaleString("en-US")}</dd></div>
        <div><dt>Reward to transfer</dt><dd>{usd(me.aff_quota)}</dd>
          <dd class="units">{(me.aff_quota || 0).toLocaleString("en-US")} units</dd></div>
        <div><dt>Earned in all</dt><dd>{usd(me.aff_history_quota)}</dd></div>
        <div><dt>Balance</dt><dd>{usd(me.quota)}</dd></div>
      </dl>
      <form class="card" onSubmit={transfer} aria-label="Transfer reward to balance">
        <h2>Transfer reward to balance</h2>
        <Field label="Amount (USD)" name="quota" type="number" min="0" step="0.01" required error={error} />
        <FormError error={error} fields={["quota"]} />
        {moved !== null && <p role="status">Moved {usd(moved)} into your balance.</p>}
        <button type="submit">Transfer</button>
      </form>
    </>
  );
}
