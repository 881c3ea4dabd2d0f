import MarkdownIt from "markdown-it";

// Markdown to HTML with markdown-it: CommonMark with GFM tables, strikethrough and autolinks.
// markdown-it is built to stay near-linear on the CommonMark pathological inputs (unclosed
// emphasis, nested brackets) and stops nesting at its maxNesting (100) instead of recursing
// until the stack overflows. Raw HTML passes through, as a sender writing an email expects.
const renderer = new MarkdownIt({ html: true, linkify: true });

export function renderMarkdown(markdown: string): string {
  return renderer.render(markdown);
}
