// HTML built by a tagged template that escapes every interpolated value, so a name, an email
// or a DNS answer can never become markup. Markup is passed on only as Html, which only this
// template (or trusted()) makes.

export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

const ENTITIES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

function render(v: unknown): string {
  if (v instanceof Html) return v.value;
  if (Array.isArray(v)) return v.map(render).join("");
  if (v === undefined || v === null || v === false) return "";
  return escapeHtml(String(v));
}

/** html`<p>${text}</p>`: text is escaped; Html values and arrays of them are inserted as they are. */
export function html(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0]!;
  values.forEach((v, i) => {
    out += render(v) + strings[i + 1]!;
  });
  return new Html(out);
}

/** Markup made elsewhere and known to be safe (rendered Markdown of our own docs). */
export function trusted(markup: string): Html {
  return new Html(markup);
}

/** A time as people read it, in UTC, inside a machine-readable <time>. */
export function time(ms: number): Html {
  const iso = new Date(ms).toISOString();
  return html`<time datetime="${iso}">${iso.slice(0, 16).replace("T", " ")} UTC</time>`;
}
