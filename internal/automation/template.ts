import { randomBytes } from "node:crypto";
import type { Fields } from "../records/audience_types";
import { escapeHtml } from "../web/html";

// The placeholders of campaign and workflow messages: {{subscriber.name}},
// {{subscriber.email}}, {{subscriber.fields.KEY}} and {{unsubscribeUrl}}. A placeholder with
// nothing to fill (a field the subscriber lacks) becomes empty; any other {{...}} stays as written.

export interface TemplateValues {
  subscriber: { email: string; name: string; fields: Fields };
  unsubscribeUrl: string;
}

const PLACEHOLDER =
  /\{\{\s*(subscriber\.name|subscriber\.email|subscriber\.fields\.[A-Za-z0-9_-]{1,64}|unsubscribeUrl)\s*\}\}/g;

function placeholderValue(name: string, v: TemplateValues): string {
  if (name === "unsubscribeUrl") return v.unsubscribeUrl;
  if (name === "subscriber.name") return v.subscriber.name;
  if (name === "subscriber.email") return v.subscriber.email;
  const field = v.subscriber.fields[name.slice("subscriber.fields.".length)];
  return field === null || field === undefined ? "" : String(field);
}

/** Fills the placeholders of template; in HTML, every value is escaped. */
export function fillTemplate(template: string, values: TemplateValues, o: { html: boolean }): string {
  return template.replace(PLACEHOLDER, (_, name: string) => {
    const value = placeholderValue(name, values);
    return o.html ? escapeHtml(value) : value;
  });
}

/**
 * Renders a template's Markdown with its placeholders kept as they are: Markdown would turn
 * subscriber.name into a link and percent-encode a link's {{unsubscribeUrl}}, so each
 * placeholder stands in as a plain word while it renders.
 */
export function renderTemplateMarkdown(markdown: string, render: (md: string) => string): string {
  const nonce = randomBytes(6).toString("hex");
  const held: string[] = [];
  const words = markdown.replace(PLACEHOLDER, (p) => `mcph${nonce}n${held.push(p) - 1}x`);
  return render(words).replace(new RegExp(`mcph${nonce}n(\\d+)x`, "g"), (_, i: string) => held[Number(i)]!);
}
