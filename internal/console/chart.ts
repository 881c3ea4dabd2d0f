import type { RefusalMinute } from "../gen/mailcore/limiter/v1/console_pb";
import { type Html, html } from "../web/html";

// Bar charts drawn on the server as SVG (no script, nothing the Content-Security-Policy has to
// allow): one slot per interval, its series stacked or side by side. Every slot has a <title>
// with its figures; the page beside it has the totals as text.

/** One series of a chart: its key in each slot's values, its colour and its name. */
export type Series = readonly [key: string, color: string, label: string];

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

export interface BarChart {
  /** Unique on its page: the ids of the chart's title and description. */
  id: string;
  title: string;
  description: string;
  series: readonly Series[];
  /** Oldest first: each slot's tooltip and its value per series key. */
  slots: { title: string; values: Record<string, number> }[];
  stacked: boolean;
  /** The labels under the left end, the middle and the right end. */
  axis: readonly [string, string, string];
}

export function barChart(c: BarChart): Html {
  const heights = c.slots.map((s) =>
    c.stacked
      ? c.series.reduce((n, [key]) => n + (s.values[key] ?? 0), 0)
      : Math.max(0, ...c.series.map(([key]) => s.values[key] ?? 0)),
  );
  const top = niceCeiling(Math.max(0, ...heights));
  const plotW = W - LEFT - RIGHT;
  const plotH = H - TOP - BOTTOM;
  const slot = plotW / Math.max(1, c.slots.length);
  const width = c.stacked ? Math.max(1, slot - 2) : Math.max(1, (slot - 2) / c.series.length);
  const y = (v: number) => TOP + plotH - (v / top) * plotH;
  const bars = c.slots.map((s, i) => {
    let base = 0;
    const rects = c.series.map(([key, color], k) => {
      const v = s.values[key] ?? 0;
      if (v === 0) return "";
      const x = LEFT + i * slot + 1 + (c.stacked ? 0 : k * width);
      const r = html`<rect x="${x.toFixed(1)}" y="${y(base + v).toFixed(1)}" width="${width.toFixed(1)}" height="${((v / top) * plotH).toFixed(1)}" fill="${color}"></rect>`;
      if (c.stacked) base += v;
      return r;
    });
    return html`<g><title>${s.title}</title>${rects}</g>`;
  });
  return html`<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-labelledby="${c.id}-title ${c.id}-desc" xmlns="http://www.w3.org/2000/svg">
<title id="${c.id}-title">${c.title}</title>
<desc id="${c.id}-desc">${c.description}</desc>
<line x1="${LEFT}" y1="${TOP + plotH}" x2="${W - RIGHT}" y2="${TOP + plotH}" stroke="#767676"></line>
<line x1="${LEFT}" y1="${TOP}" x2="${W - RIGHT}" y2="${TOP}" stroke="#dddddd"></line>
<text x="${LEFT - 6}" y="${TOP + 6}" text-anchor="end" font-size="${FONT}" fill="#333333">${top}</text>
<text x="${LEFT - 6}" y="${TOP + plotH + 6}" text-anchor="end" font-size="${FONT}" fill="#333333">0</text>
<text x="${LEFT}" y="${H - 8}" font-size="${FONT}" fill="#333333">${c.axis[0]}</text>
<text x="${LEFT + plotW / 2}" y="${H - 8}" text-anchor="middle" font-size="${FONT}" fill="#333333">${c.axis[1]}</text>
<text x="${W - RIGHT}" y="${H - 8}" text-anchor="end" font-size="${FONT}" fill="#333333">${c.axis[2]}</text>
${bars}
</svg>`;
}

export function refusalChart(minutes: RefusalMinute[]): Html {
  const totals = minutes.map((m) => m.quota + m.ip + m.recipient);
  const total = totals.reduce((a, b) => a + b, 0);
  return barChart({
    id: "chart",
    title: "Refused requests (429) per minute, last 60 minutes",
    description: `${total} refused in the last hour; the highest minute had ${Math.max(0, ...totals)}.`,
    series: KINDS,
    stacked: true,
    axis: ["60 min ago", "30 min ago", "now"],
    slots: minutes.map((m) => {
      const at = new Date(Number(m.minuteStartMs)).toISOString().slice(11, 16);
      return {
        title: `${at} UTC: ${m.quota} quota, ${m.ip} IP limit, ${m.recipient} recipient`,
        values: { quota: m.quota, ip: m.ip, recipient: m.recipient },
      };
    }),
  });
}

export const CHART_KINDS = KINDS;
