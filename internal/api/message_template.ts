import { renderTemplateMarkdown } from "../automation/template";
import { renderMarkdown } from "../markdown/markdown";
import { InvalidField } from "./invalid_field";
import { parseSendRequest } from "./send_request";

/** parseSendRequest checks a message to one recipient; a campaign's or a workflow's recipients come later. */
const SOME_RECIPIENT = "recipient@campaign.invalid";

/**
 * A message to subscribers (a campaign's, a workflow email step's): from, subject and one of
 * html, text or markdown, checked as a send is; its placeholders are filled for each subscriber.
 */
export function parseMessageTemplate(o: Record<string, unknown>): {
  from: string;
  fromAddress: string;
  subject: string;
  html: string;
  text: string;
} {
  const { email } = parseSendRequest({ from: o.from, to: SOME_RECIPIENT, subject: o.subject, ...bodies(o) });
  return {
    from: email.from,
    fromAddress: email.fromAddress,
    subject: email.subject,
    html: email.html,
    text: email.text,
  };
}

/** html and text, with Markdown rendered around the placeholders (and kept as the text part when there is none). */
function bodies(o: Record<string, unknown>): { html: unknown; text: unknown } {
  if (o.markdown === undefined || o.markdown === null || o.markdown === "") return { html: o.html, text: o.text };
  if (typeof o.markdown !== "string") throw new InvalidField("markdown", "must be a string");
  if (o.html !== undefined && o.html !== null && o.html !== "")
    throw new InvalidField("markdown", "cannot be combined with html");
  let html: string;
  try {
    html = renderTemplateMarkdown(o.markdown, renderMarkdown);
  } catch {
    throw new InvalidField("markdown", "cannot be rendered (nested too deeply)");
  }
  return { html, text: o.text ?? o.markdown };
}
