import { type Html, html } from "../web/html";
import { pageHeaders } from "../web/headers";
import { sitePage } from "../web/page";
import { openApiDocument } from "../api/openapi/document";
import { OPENAPI_PATH } from "../api/openapi/service";
import { getOnly } from "../api/respond";

// The API reference at /docs: the OpenAPI document rendered on the server as plain HTML (no
// script, no CDN), and the document itself at /api/v1/openapi.json. Both are made once at start.

export const REFERENCE_PATH = "/docs";
const METHODS = ["get", "post", "put", "patch", "delete"] as const;

type Obj = Record<string, unknown>;

/** Follows a local $ref (#/components/...) to what it names. */
function resolve(doc: Obj, node: unknown): Obj {
  let n = node as Obj;
  while (n && typeof n.$ref === "string") {
    n = (n.$ref as string)
      .slice(2)
      .split("/")
      .reduce<unknown>((at, part) => (at as Obj)[part], doc) as Obj;
  }
  return n ?? {};
}

/** A description: plain text whose `backticked` parts are code (the only Markdown these descriptions use). */
function prose(text: unknown): Html {
  if (typeof text !== "string") return html``;
  return html`${text.split("`").map((part, i) => (i % 2 ? html`<code>${part}</code>` : part))}`;
}

const refName = (node: unknown) =>
  typeof (node as Obj)?.$ref === "string" ? ((node as Obj).$ref as string).split("/").pop() : undefined;

/** A schema in a few words: its type, enum or constant, pattern and limits; a named schema links to its section. */
function typeOf(doc: Obj, node: unknown): Html {
  const name = refName(node);
  const s = resolve(doc, node);
  const joined = (items: unknown[], sep: string) => html`${items.map((v, i) => html`${i ? sep : ""}${v}`)}`;
  if (s.const !== undefined) return html`${JSON.stringify(s.const)}`;
  if (Array.isArray(s.enum))
    return joined(
      s.enum.map((v) => JSON.stringify(v)),
      " | ",
    );
  if (Array.isArray(s.oneOf))
    return joined(
      s.oneOf.map((o) => typeOf(doc, o)),
      " or ",
    );
  if (name && (s.type === "object" || s.allOf)) return html`<a href="#schema-${name}">${name}</a>`;
  if (Array.isArray(s.allOf)) return typeOf(doc, s.allOf[0]);
  if (s.type === "array")
    return html`list of ${typeOf(doc, s.items)}${s.maxItems !== undefined ? ` (at most ${s.maxItems})` : ""}`;
  const limits = [
    s.format,
    s.pattern ? `pattern ${s.pattern}` : undefined,
    s.maxLength !== undefined ? `at most ${s.maxLength} characters` : undefined,
  ].filter(Boolean);
  return html`${(s.type as string) ?? "object"}${limits.length ? ` (${limits.join(", ")})` : ""}`;
}

/** An object schema's properties (allOf merged) as rows. */
function fields(doc: Obj, node: unknown): Html {
  const s = resolve(doc, node);
  const parts = [...((s.allOf as unknown[]) ?? []).map((p) => resolve(doc, p)), s];
  const props: Obj = Object.assign({}, ...parts.map((p) => (p.properties as Obj) ?? {}));
  const required = new Set(parts.flatMap((p) => (p.required as string[]) ?? []));
  if (Object.keys(props).length === 0) return html`<p>${typeOf(doc, node)}</p>`;
  return html`<div class="table-wrap"><table><thead><tr><th scope="col">Field</th><th scope="col">Type</th><th scope="col">About</th></tr></thead><tbody>
${Object.entries(props).map(([name, p]) => {
  const desc = resolve(doc, p).description ?? (p as Obj).description;
  return html`<tr><td><code>${name}</code>${required.has(name) ? html` <span class="hint">required</span>` : html``}</td><td>${typeOf(doc, p)}</td><td>${prose(desc)}</td></tr>`;
})}
</tbody></table></div>`;
}

function jsonSchema(content: unknown): unknown {
  return (content as Obj | undefined)?.["application/json"]
    ? ((content as Obj)["application/json"] as Obj).schema
    : undefined;
}

function operation(doc: Obj, path: string, method: string, op: Obj): Html {
  const id = op.operationId as string;
  const params = ((op.parameters as Obj[]) ?? []).map((p) => resolve(doc, p));
  const body = jsonSchema(resolve(doc, op.requestBody).content);
  const responses = Object.entries((op.responses as Obj) ?? {});
  const open = Array.isArray(op.security) && op.security.length === 0;
  return html`<section class="endpoint" id="${id}" aria-labelledby="${id}-title">
<h3 id="${id}-title"><span class="method">${method.toUpperCase()}</span> <code>${path}</code></h3>
<p><strong>${op.summary as string}.</strong> ${prose(op.description)}${open ? html` <em>No token needed.</em>` : html``}</p>
${
  params.length
    ? html`<h4>Parameters</h4><div class="table-wrap"><table><thead><tr><th scope="col">Name</th><th scope="col">In</th><th scope="col">Type</th><th scope="col">About</th></tr></thead><tbody>
${params.map((p) => html`<tr><td><code>${p.name as string}</code>${p.required ? html` <span class="hint">required</span>` : html``}</td><td>${p.in as string}</td><td>${typeOf(doc, p.schema)}</td><td>${prose(p.description)}</td></tr>`)}
</tbody></table></div>`
    : html``
}
${body ? html`<h4>Request body (application/json)</h4>${fields(doc, body)}` : html``}
<h4>Responses</h4>
<div class="table-wrap"><table><thead><tr><th scope="col">Status</th><th scope="col">When</th><th scope="col">Body</th></tr></thead><tbody>
${responses.map(([status, r]) => {
  const res = resolve(doc, r);
  const schema = jsonSchema(res.content);
  return html`<tr><td><code>${status}</code></td><td>${prose(res.description)}</td><td>${schema ? typeOf(doc, schema) : html`<span class="hint">none</span>`}${codes(doc, schema)}</td></tr>`;
})}
</tbody></table></div>
</section>`;
}

/** The error codes an answer's body may carry, when it names them. */
function codes(doc: Obj, schema: unknown): Html {
  if (!schema) return html``;
  const s = resolve(doc, schema);
  const code = resolve(doc, (s.properties as Obj | undefined)?.code);
  const list = code.const !== undefined ? [code.const] : (code.enum as unknown[] | undefined);
  return list
    ? html`<br><span class="hint">code ${list.map((c, i) => html`${i ? ", " : ""}<code>${String(c)}</code>`)}</span>`
    : html``;
}

function page(doc: Obj): string {
  const info = doc.info as Obj;
  const tags = doc.tags as { name: string; description: string }[];
  const paths = doc.paths as Record<string, Obj>;
  const ops = Object.entries(paths).flatMap(([path, item]) =>
    METHODS.filter((m) => item[m]).map((m) => ({ path, method: m, op: item[m] as Obj })),
  );
  const schemas = (doc.components as Obj).schemas as Obj;
  return referencePage(
    "API reference",
    html`<h1>${info.title as string} <span class="hint">v${info.version as string}</span></h1>
<p>${prose(info.description)}</p>
<p>Machine-readable: <a href="${OPENAPI_PATH}">${OPENAPI_PATH}</a> (OpenAPI 3.1). Rate limits in full: <a href="/docs/rate-limits">/docs/rate-limits</a>.</p>
<nav aria-label="Endpoints"><ul class="toc">
${ops.map(({ path, method, op }) => html`<li><a href="#${op.operationId as string}"><span class="method">${method.toUpperCase()}</span> ${path}</a></li>`)}
<li><a href="#headers">Headers</a></li>
<li><a href="#schemas">Schemas</a></li>
</ul></nav>
${tags.map(
  (t) => html`<h2 id="tag-${t.name}">${t.name}</h2><p>${prose(t.description)}</p>
${ops.filter(({ op }) => (op.tags as string[]).includes(t.name)).map(({ path, method, op }) => operation(doc, path, method, op))}`,
)}
<h2 id="headers">Headers</h2>
<p>Every answer of an <code>/api/v1</code> endpoint carries the rate-limit headers, 429s and authentication failures included; a 429 adds <code>Retry-After</code>.</p>
<div class="table-wrap"><table><thead><tr><th scope="col">Header</th><th scope="col">About</th><th scope="col">Example</th></tr></thead><tbody>
${Object.entries((doc.components as Obj).headers as Record<string, Obj>).map(
  ([name, h]) =>
    html`<tr><td><code>${name}</code></td><td>${prose(h.description)}</td><td><code>${String(h.example)}</code></td></tr>`,
)}
</tbody></table></div>
<h2 id="schemas">Schemas</h2>
${Object.keys(schemas).map((name) => html`<section class="endpoint" id="schema-${name}"><h3>${name}</h3><p>${prose(resolve(doc, schemas[name]).description)}</p>${fields(doc, schemas[name])}</section>`)}`,
  );
}

/** A page of the reference (/docs and the pages beside it): the site's page around `main`. */
export function referencePage(title: string, main: Html): string {
  return sitePage(
    title,
    html`<main id="content">
${main}
</main>`,
  );
}

/** Serves /docs and /api/v1/openapi.json; undefined for every other path. */
export function referenceHandler(): (req: Request, url: URL) => Response | undefined {
  const doc = openApiDocument();
  const json = JSON.stringify(doc, null, 2);
  const htmlPage = page(doc);
  return (req, url) => {
    if (url.pathname === OPENAPI_PATH)
      return getOnly(
        req,
        url.pathname,
        () =>
          new Response(json, {
            headers: {
              "Content-Type": "application/json",
              "Access-Control-Allow-Origin": "*",
              "X-Content-Type-Options": "nosniff",
            },
          }),
      );
    if (url.pathname === REFERENCE_PATH)
      return getOnly(
        req,
        url.pathname,
        () => new Response(htmlPage, { headers: pageHeaders({ "Cache-Control": "public, max-age=300" }) }),
      );
    return undefined;
  };
}
