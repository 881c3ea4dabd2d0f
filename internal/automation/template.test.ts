import { expect, test } from "bun:test";
import { renderMarkdown } from "../markdown/markdown";
import { fillTemplate, renderTemplateMarkdown, type TemplateValues } from "./template";

const values: TemplateValues = {
  subscriber: {
    email: "ann@example.com",
    name: 'Ann <the "admin"> & co',
    fields: { plan: "pro", seats: 3, gone: null },
  },
  unsubscribeUrl: "http://mail.example/u/abc?x=1&y=2",
};

test("every placeholder is filled; a missing field is empty; other braces stay", () => {
  const t =
    "{{subscriber.name}}|{{ subscriber.email }}|{{subscriber.fields.plan}}|{{subscriber.fields.seats}}|{{subscriber.fields.gone}}|{{subscriber.fields.none}}|{{unsubscribeUrl}}|{{other}}";
  expect(fillTemplate(t, values, { html: false })).toBe(
    'Ann <the "admin"> & co|ann@example.com|pro|3|||http://mail.example/u/abc?x=1&y=2|{{other}}',
  );
});

test("in HTML every value is escaped, the template itself is not", () => {
  expect(
    fillTemplate('<p>Hi {{subscriber.name}}</p><a href="{{unsubscribeUrl}}">out</a>', values, { html: true }),
  ).toBe('<p>Hi Ann &lt;the &quot;admin&quot;&gt; &amp; co</p><a href="http://mail.example/u/abc?x=1&amp;y=2">out</a>');
});

test("Markdown renders around the placeholders: none becomes a link or is percent-encoded", () => {
  const html = renderTemplateMarkdown(
    "Hi **{{subscriber.name}}** ({{subscriber.fields.plan}}). [Unsubscribe]({{unsubscribeUrl}})",
    renderMarkdown,
  );
  expect(html).toBe(
    '<p>Hi <strong>{{subscriber.name}}</strong> ({{subscriber.fields.plan}}). <a href="{{unsubscribeUrl}}">Unsubscribe</a></p>\n',
  );
  expect(fillTemplate(html, values, { html: true })).toContain('<a href="http://mail.example/u/abc?x=1&amp;y=2">');
});
