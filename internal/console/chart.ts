import type { RefusalMinute } from "../gen/mailcore/limiter/v1/console_pb";
import { type Html, html } from "../web/html";

// The refusals of the last hour as stacked bars, one per minute, drawn on the server as SVG
// (no script, nothing the Content-Security-Policy has to allow). Every bar has a <title> with
// its figures; the page beside it has the totals as text.

const KINDS = [
  ["quota", "#b45309", "quota"],
  ["ip", "#1d4ed8", "IP limit"],
  ["recipient", "#7e22ce", "recipient"],
] as const;

const W = 640;
const H = 220;
const LEFT = 48;
const RIGHT = 10;
const TOP = 14;
const BOTTOM = 32;
const FONT = 16;

/** The smallest of 1, 2, 5 times a power of ten that is at least n. */
function niceCeiling(n: number): number {
  if (n <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(n));
  return [1, 2, 5, 10].map((f) => f * p).find((c) => c >= n)!;
}

export function refusalChart(minutes: RefusalMinute[]): Html {
  const totals = minutes.map((m) => m.quota + m.ip + m.recipient);
  const top = niceCeiling(Math.max(0, ...totals));
  const plotW = W - LEFT - RIGHT;
  const plotH = H - TOP - BOTTOM;
  const slot = plotW / Math.max(1, minutes.length);
  const y = (v: number) => TOP + plotH - (v / top) * plotH;
  const bars = minutes.map((m, i) => {
    let base = 0;
    const x = (LEFT + i * slot + 1).toFixed(1);
    const rects = KINDS.map(([kind, color]) => {
      const v = m[kind];
      if (v === 0) return "";
      const r = html`<rect x="${x}" y="${y(base + v).toFixed(1)}" width="${Math.max(1, slot - 2).toFixed(1)}" height="${((v / top) * plotH).toFixed(1)}" fill="${color}"></rect>`;
      base += v;
      return r;
    });
    const at = new Date(Number(m.minuteStartMs)).toISOString().slice(11, 16);
    return html`<g><title>${at} UTC: ${m.quota} quota, ${m.ip} IP limit, ${m.recipient} recipient</title>${rects}</g>`;
  });
  const total = totals.reduce((a, b) => a + b, 0);
  return html`<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-labelledby="chart-title chart-desc" xmlns="http://www.w3.org/2000/svg">
<title id="chart-title">Refused requests (429) per minute, last 60 minutes</title>
<desc id="chart-desc">${total} refused in the last hour; the highest minute had ${Math.max(0, ...totals)}.</desc>
<line x1="${LEFT}" y1="${TOP + plotH}" x2="${W - RIGHT}" y2="${TOP + plotH}" stroke="#767676"></line>
<line x1="${LEFT}" y1="${TOP}" x2="${W - RIGHT}" y2="${TOP}" stroke="#dddddd"></line>
<text x="${LEFT - 6}" y="${TOP + 6}" text-anchor="end" font-size="${FONT}" fill="#333333">${top}</text>
<text x="${LEFT - 6}" y="${TOP + plotH + 6}" text-anchor="end" font-size="${FONT}" fill="#333333">0</text>
<text x="${LEFT}" y="${H - 8}" font-size="${FONT}" fill="#333333">60 min ago</text>
<text x="${LEFT + plotW / 2}" y="${H - 8}" text-anchor="middle" font-size="${FONT}" fill="#333333">30 min ago</text>
<text x="${W - RIGHT}" y="${H - 8}" text-anchor="end" font-size="${FONT}" fill="#333333">now</text>
${bars}
</svg>`;
}

export const CHART_KINDS = KINDS;
