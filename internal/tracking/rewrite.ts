// Open and click tracking applied to a message's HTML, once its placeholders are filled and before
// it is signed: every http(s) link (the href of <a> and <area>) becomes a redirect through
// /t/c/<token>, and a 1x1 image /t/o/<token> is added before </body>. The unsubscribe link (the
// List-Unsubscribe target, and any link to PUBLIC_URL/u/ that {{unsubscribeUrl}} made) is left as
// written, and so is every link into PUBLIC_URL's /t/.
//
// htmlparser2's tokenizer finds the attributes the way a browser's would (entities, quotes or none,
// upper-case names; no links inside comments, <style>, <script>, <title> or <textarea>), and gives
// their places in the source; only the value of each rewritten href is replaced, every other byte of
// the HTML stays as it was.
import { QuoteType, Tokenizer } from "htmlparser2";
import { clickUrl, openUrl, type TrackingKey, trackableUrl } from "./token";

export interface TrackingOptions {
  /** PUBLIC_URL: where /t/o/ and /t/c/ are served. */
  publicUrl: string;
  messageId: string;
  key: TrackingKey;
  opens: boolean;
  clicks: boolean;
  /** Links never rewritten (the List-Unsubscribe target). */
  unsubscribeUrls?: readonly string[];
}

export interface TrackedHtml {
  html: string;
  /** The links rewritten, by index (the index their tokens carry). */
  links: string[];
  /** Whether the open pixel was added. */
  pixel: boolean;
}

const LINK_TAGS = new Set(["a", "area"]);

interface Href {
  /** Where the value starts and ends in the source (without its quotes). */
  start: number;
  end: number;
  quote: QuoteType;
  /** The value as a browser reads it, entities decoded. */
  value: string;
}

interface Scan {
  hrefs: Href[];
  /** Where the last </body> (else </html>) starts; undefined when there is neither. */
  closing?: number;
}

/** The href of every <a> and <area> (the first of a tag's hrefs, as a browser takes it), and where the body ends. */
function scan(html: string): Scan {
  const hrefs: Href[] = [];
  let tag = "";
  let attribute = "";
  let value = "";
  let nameEnd = 0;
  let tookHref = false;
  let bodyEnd: number | undefined;
  let htmlEnd: number | undefined;
  const tokenizer = new Tokenizer(
    { decodeEntities: true },
    {
      onopentagname(start, end) {
        tag = html.slice(start, end).toLowerCase();
        tookHref = false;
      },
      onattribname(start, end) {
        attribute = html.slice(start, end).toLowerCase();
        nameEnd = end;
        value = "";
      },
      onattribdata(start, end) {
        value += html.slice(start, end);
      },
      onattribentity(codepoint) {
        value += String.fromCodePoint(codepoint);
      },
      onattribend(quote, end) {
        if (!LINK_TAGS.has(tag) || attribute !== "href" || tookHref || quote === QuoteType.NoValue) return;
        tookHref = true;
        const quoted = quote === QuoteType.Double || quote === QuoteType.Single;
        // The value starts after the "=", the white space around it and the opening quote.
        const equals = html.indexOf("=", nameEnd);
        let start = equals + 1;
        while (/\s/.test(html[start]!)) start++;
        if (quoted) start++;
        hrefs.push({ start, end: quoted ? end - 1 : end, quote, value });
      },
      onclosetag(start, end) {
        const name = html.slice(start, end).toLowerCase();
        // start is the name's; "</" comes before it.
        if (name === "body") bodyEnd = start - 2;
        else if (name === "html") htmlEnd = start - 2;
      },
      oncdata() {},
      oncomment() {},
      ondeclaration() {},
      onend() {},
      onopentagend() {},
      onprocessinginstruction() {},
      onselfclosingtag() {},
      ontext() {},
      ontextentity() {},
    },
  );
  tokenizer.write(html);
  tokenizer.end();
  return { hrefs, closing: bodyEnd ?? htmlEnd };
}

/** The URL as a browser resolves it, or undefined when it is not one (a relative link, a mailto:). */
function normalized(url: string): string | undefined {
  try {
    return new URL(url).href;
  } catch {
    return undefined;
  }
}

/** Applies open and click tracking to html (see the top of this file). */
export function applyTracking(html: string, o: TrackingOptions): TrackedHtml {
  if (!o.opens && !o.clicks) return { html, links: [], pixel: false };
  const found = scan(html);
  const base = (normalized(o.publicUrl) ?? o.publicUrl).replace(/\/+$/, "");
  const own = [`${base}/u/`, `${base}/t/`];
  const unsubscribe = new Set((o.unsubscribeUrls ?? []).map(normalized).filter((u) => u !== undefined));
  const tracked = o.clicks
    ? found.hrefs.flatMap((h) => {
        const url = normalized(h.value);
        if (!url || !trackableUrl(url) || unsubscribe.has(url) || own.some((p) => url.startsWith(p))) return [];
        return [{ ...h, url }];
      })
    : [];
  const links = tracked.map((t) => t.url);
  const edits: { start: number; end: number; text: string }[] = tracked.map((t, link) => ({
    start: t.start,
    end: t.end,
    text: attributeText(
      clickUrl(o.publicUrl, { messageId: o.messageId, link, links: links.length, url: t.url }, o.key),
    ),
  }));
  if (o.opens) {
    const at = found.closing ?? html.length;
    const src = attributeText(openUrl(o.publicUrl, o.messageId, o.key));
    edits.push({
      start: at,
      end: at,
      text: `<img src="${src}" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0;margin:0;padding:0" />`,
    });
  }
  // One pass over the source, the edits in order (they never overlap).
  const pieces: string[] = [];
  let at = 0;
  for (const e of edits.sort((a, b) => a.start - b.start)) {
    pieces.push(html.slice(at, e.start), e.text);
    at = e.end;
  }
  pieces.push(html.slice(at));
  return { html: pieces.join(""), links, pixel: o.opens };
}

/** A URL written into an attribute value of any quoting: what could end or change the value is a character reference. */
function attributeText(url: string): string {
  return url.replace(/[&"'<>`=\s]/g, (c) => `&#${c.codePointAt(0)};`);
}
