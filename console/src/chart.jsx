// Spend per day, stacked by model (bars), with the requests per day as a line; the legend shows
// each model's own value for the day under the pointer. uPlot draws on a canvas: the figure has
// an accessible name and a table of the same numbers for screen readers.
import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import { UNITS_PER_USD, usd } from "./api.js";

const COLORS = ["#2563eb", "#16a34a", "#d97706", "#db2777", "#7c3aed", "#0891b2", "#65a30d", "#dc2626"];

export function days(first, last) {
  const out = [];
  for (let d = new Date(first + "T00:00:00Z"); d <= new Date(last + "T00:00:00Z"); d.setUTCDate(d.getUTCDate() + 1)) {
    out.push(d.toISOString().slice(0, 10));
  }
  return out;
}

export function SpendChart({ spend, label }) {
  const box = useRef(null);
  const span = days(spend.start_day, spend.end_day);
  const models = [...new Set(spend.rows.map((r) => r.model_name))].sort();
  const units = models.map((m) => span.map((d) => spend.rows.filter((r) => r.day === d && r.model_name === m)
    .reduce((sum, r) => sum + r.quota, 0)));
  const requests = span.map((d) => spend.rows.filter((r) => r.day === d).reduce((sum, r) => sum + r.count, 0));

  useEffect(() => {
    if (!box.current) return undefined;
    const x = span.map((d) => Date.parse(d + "T00:00:00Z") / 1000);
    // Stacked: each model's bar reaches the sum of it and the models below; drawn tallest first.
    const stacked = [];
    let running = span.map(() => 0);
    for (const series of units) {
      running = running.map((v, i) => v + series[i] / UNITS_PER_USD);
      stacked.push(running);
    }
    const bars = uPlot.paths.bars({ size: [0.7, 40] });
    const opts = {
      width: Math.max(280, box.current.clientWidth), height: 240,
      scales: { x: { time: true, range: () => [x[0] - 43200, x[x.length - 1] + 43200] },
        // The spend axis follows the spend: a day of $0.0004 is a visible bar, not a line on $0.01's floor.
        usd: { range: (u, lo, hi) => [0, (hi > 0 ? hi : 0.01) * 1.1] },
        req: { range: (u, lo, hi) => [0, Math.max(hi, 1) * 1.1] } },
      axes: [{ splits: () => x, values: (u, vals) => {
        const every = Math.ceil(vals.length / Math.max(1, Math.floor(u.bbox.width / devicePixelRatio / 48)));
        return vals.map((v, i) => (i % every ? "" : new Date(v * 1000).toISOString().slice(5, 10)));
      } }, { scale: "usd", size: 64, values: (u, vals) => vals.map((v) => `$${v >= 1 ? v.toFixed(0) : Number(v.toPrecision(2))}`) },
        { scale: "req", side: 1, grid: { show: false } }],
      series: [{},
        ...models.map((m, i) => ({ label: m, scale: "usd", fill: COLORS[i % COLORS.length],
          stroke: COLORS[i % COLORS.length], paths: bars, points: { show: false },
          value: (u, v, si, idx) => (idx == null ? "-" : usd(units[i][idx])) })).reverse(),
        { label: "requests served", scale: "req", stroke: "#111827", width: 2, value: (u, v) => (v == null ? "-" : v) }],
    };
    const data = [x, ...stacked.slice().reverse(), requests];
    const plot = new uPlot(opts, data, box.current);
    const resize = () => plot.setSize({ width: Math.max(280, box.current.clientWidth), height: 240 });
    window.addEventListener("resize", resize);
    return () => {
      window.removeEventListener("resize", resize);
      plot.destroy();
    };
  }, [JSON.stringify(spend)]);

  const total = units.flat().reduce((a, b) => a + b, 0);
  return (
    <figure class="chart" role="img" aria-label={`${label}: ${usd(total)} over ${span.length} days`}>
      <div ref={box} />
      <figcaption>
        {label}: {usd(total)} and {requests.reduce((a, b) => a + b, 0)} requests served
        {models.length ? ` (${models.join(", ")})` : " (nothing spent yet)"}
      </figcaption>
    </figure>
  );
}
