// Reading the repository's Markdown for the docs' checks: the headings' anchors as GitHub makes
// them, the relative links, and the folders the code map of docs/architecture.md names.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import GithubSlugger from "github-slugger";
import MarkdownIt from "markdown-it";

type Token = ReturnType<MarkdownIt["parse"]>[number];

const markdown = new MarkdownIt();

/** The Markdown files whose links are checked: the README, docs/ (all of it), the site's pages, the dated results. */
export function markdownFiles(root: string): string[] {
  const under = (dir: string, recursive: boolean): string[] =>
    existsSync(join(root, dir))
      ? readdirSync(join(root, dir), { withFileTypes: true }).flatMap((e) => {
          const path = `${dir}/${e.name}`;
          if (e.isDirectory()) return recursive ? under(path, true) : [];
          return e.name.endsWith(".md") ? [path] : [];
        })
      : [];
  return ["README.md", ...under("docs", true), ...under("internal/site", false), ...under("loadtest/results", false)];
}

/** The text of an inline token as GitHub slugs it: its text and code, without the markup. */
function plainText(inline: Token): string {
  return (inline.children ?? [])
    .map((c) => (c.type === "text" || c.type === "code_inline" ? c.content : c.type === "softbreak" ? " " : ""))
    .join("");
}

/** The anchors of a Markdown text's headings, in order, as GitHub makes them (a repeated heading gets -1, -2, ...). */
export function headingAnchors(text: string): string[] {
  const slugger = new GithubSlugger();
  const tokens = markdown.parse(text, {});
  return tokens.flatMap((t, i) => (t.type === "heading_open" ? [slugger.slug(plainText(tokens[i + 1]!))] : []));
}

/** The headings of a Markdown text as written (their plain text), in order. */
export function headings(text: string): string[] {
  const tokens = markdown.parse(text, {});
  return tokens.flatMap((t, i) => (t.type === "heading_open" ? [plainText(tokens[i + 1]!)] : []));
}

/**
 * The relative links and images of a Markdown text: every target that names no scheme
 * (`https:`, `mailto:`) and is not a path of the site (`/docs`), same-file anchors included.
 */
export function relativeLinks(text: string): string[] {
  const targets = markdown
    .parse(text, {})
    .filter((t) => t.type === "inline")
    .flatMap((t) => t.children ?? [])
    .flatMap((c) => {
      const target = c.type === "link_open" ? c.attrGet("href") : c.type === "image" ? c.attrGet("src") : null;
      return target === null ? [] : [target];
    });
  return targets.filter((t) => !/^[a-z][a-z0-9+.-]*:/i.test(t) && !t.startsWith("/"));
}

/** What is wrong with each relative link of the files (paths from root): a missing file, a missing heading, a path outside the repository. */
export function brokenLinks(root: string, files: string[]): string[] {
  const anchorsOf = new Map<string, Set<string>>();
  const anchors = (file: string) => {
    let found = anchorsOf.get(file);
    if (!found) {
      found = new Set(headingAnchors(readFileSync(join(root, file), "utf8")));
      anchorsOf.set(file, found);
    }
    return found;
  };
  return files.flatMap((file) =>
    relativeLinks(readFileSync(join(root, file), "utf8")).flatMap((link) => {
      const hash = link.indexOf("#");
      const path = decodeURIComponent(hash === -1 ? link : link.slice(0, hash));
      const anchor = hash === -1 ? null : decodeURIComponent(link.slice(hash + 1));
      const target = path === "" ? join(root, file) : resolve(root, dirname(file), path);
      const inRepo = relative(root, target);
      if (inRepo.startsWith(`..${sep}`) || inRepo === "..") return [`${file}: ${link} leaves the repository`];
      if (!existsSync(target)) return [`${file}: ${link}: no such file`];
      if (anchor === null || !target.endsWith(".md") || !statSync(target).isFile()) return [];
      return anchors(inRepo).has(anchor)
        ? []
        : [`${file}: ${link}: no heading with the anchor #${anchor} in ${inRepo}`];
    }),
  );
}

/** The first fenced block under the heading `title` (its plain text), or undefined. */
export function blockUnder(text: string, title: string): string | undefined {
  const tokens = markdown.parse(text, {});
  const at = tokens.findIndex((t, i) => t.type === "heading_open" && plainText(tokens[i + 1]!) === title);
  if (at === -1) return undefined;
  for (let i = at + 1; i < tokens.length && tokens[i]!.type !== "heading_open"; i++) {
    if (tokens[i]!.type === "fence") return tokens[i]!.content;
  }
  return undefined;
}

/**
 * The folders a code map names under each top-level folder: a line `top/` at the start of a
 * line opens it, and each line that starts with two spaces and `name/` is one of its folders
 * (deeper lines and continuations of a description are not).
 */
export function codeMapFolders(map: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  let top: string | undefined;
  for (const line of map.split("\n")) {
    const opened = /^([A-Za-z0-9._-]+)\//.exec(line);
    if (opened) {
      top = opened[1]!;
      out.set(top, []);
      continue;
    }
    const child = /^ {2}([A-Za-z0-9._-]+)\/(\s|$)/.exec(line);
    if (child && top !== undefined) out.get(top)!.push(child[1]!);
  }
  return out;
}

/** The folders directly under dir (relative to root) that hold at least one file, at any depth. */
export function foldersWithFiles(root: string, dir: string): string[] {
  const holdsFile = (path: string): boolean =>
    readdirSync(path, { withFileTypes: true }).some((e) => !e.isDirectory() || holdsFile(join(path, e.name)));
  return readdirSync(join(root, dir), { withFileTypes: true })
    .filter((e) => e.isDirectory() && holdsFile(join(root, dir, e.name)))
    .map((e) => e.name)
    .sort();
}
