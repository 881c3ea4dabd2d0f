// The docs hold together: every folder under internal/ and cmd/ has its line in the code map of
// docs/architecture.md (and the map names no folder that is gone), every relative link of the
// README and the docs resolves to a file of the repository, and every #anchor into a Markdown
// file to one of its headings, by GitHub's rules; the process table and the code map are kept in
// one place; every decision record is in the index and has its parts.
import { expect, test } from "bun:test";
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  blockUnder,
  brokenLinks,
  codeMapFolders,
  foldersWithFiles,
  headingAnchors,
  headings,
  markdownFiles,
  relativeLinks,
} from "./docs";
import { REPO_ROOT, tempDir } from "./testkit";

const read = (file: string) => readFileSync(join(REPO_ROOT, file), "utf8");
const ARCHITECTURE = "docs/architecture.md";

test("every folder under internal/ and cmd/ is in the code map of docs/architecture.md, and every folder it names exists", () => {
  const map = blockUnder(read(ARCHITECTURE), "Code map");
  expect(map).toBeDefined();
  const named = codeMapFolders(map!);
  for (const top of ["internal", "cmd"]) {
    const folders = foldersWithFiles(REPO_ROOT, top);
    const listed = named.get(top) ?? [];
    expect({ top, missing: folders.filter((f) => !listed.includes(f)) }).toEqual({ top, missing: [] });
    expect({ top, gone: listed.filter((f) => !folders.includes(f)) }).toEqual({ top, gone: [] });
  }
});

test("every relative link of the README and the docs resolves, and every #anchor to a heading", () => {
  const files = markdownFiles(REPO_ROOT);
  expect(files).toContain("README.md");
  expect(files).toContain(ARCHITECTURE);
  expect(files).toContain("docs/adr/README.md");
  expect(files).toContain("internal/site/rate-limits.md");
  expect(brokenLinks(REPO_ROOT, files)).toEqual([]);
});

test("the process table and the code map are in docs/architecture.md only; the README links them", () => {
  const processTable = /^\|\s*process\s*\|\s*start\s*\|/m;
  for (const file of markdownFiles(REPO_ROOT).filter((f) => f.startsWith("docs/") || f === "README.md")) {
    const text = read(file);
    const here = file === ARCHITECTURE;
    expect({ file, processTable: processTable.test(text) }).toEqual({ file, processTable: here });
    expect({ file, codeMap: headings(text).includes("Code map") }).toEqual({ file, codeMap: here });
  }
  const readme = relativeLinks(read("README.md"));
  expect(readme).toContain("docs/architecture.md#processes");
  expect(readme).toContain("docs/architecture.md#code-map");
  expect(readme).toContain("docs/contributing.md");
});

test("every decision record is numbered in order, has its status and parts, and is in the index", () => {
  const records = readdirSync(join(REPO_ROOT, "docs/adr"))
    .filter((f) => f !== "README.md")
    .sort();
  expect(records.length).toBeGreaterThan(0);
  const index = relativeLinks(read("docs/adr/README.md"));
  records.forEach((file, i) => {
    const number = String(i + 1).padStart(4, "0");
    expect(file).toMatch(new RegExp(`^${number}-[a-z0-9]+(-[a-z0-9]+)*\\.md$`));
    const text = read(`docs/adr/${file}`);
    const [title, ...parts] = headings(text);
    expect({ file, title: title?.startsWith(`${number}. `) }).toEqual({ file, title: true });
    expect({ file, parts }).toEqual({ file, parts: ["Context", "Decision", "Consequences"] });
    expect({ file, status: /^Status: (proposed|accepted|superseded by \S.*)$/m.test(text) }).toEqual({
      file,
      status: true,
    });
    expect({ file, indexed: index.includes(file) }).toEqual({ file, indexed: true });
  });
});

test("anchors are GitHub's: lower case, punctuation dropped, code kept, spaces to hyphens, repeats numbered", () => {
  const text = [
    "# Architecture",
    "## A call's cost",
    "## `--json`",
    "## What a 202 guarantees",
    "### MailcoreLimiterdDown",
    "## The load suite (k6)",
    "## Tests",
    "## Tests",
    "```sh",
    "# a comment in a block, not a heading",
    "```",
  ].join("\n");
  expect(headingAnchors(text)).toEqual([
    "architecture",
    "a-calls-cost",
    "--json",
    "what-a-202-guarantees",
    "mailcorelimiterddown",
    "the-load-suite-k6",
    "tests",
    "tests-1",
  ]);
});

test("a broken link, a missing heading and a path out of the repository are each found; code and other sites are not links", () => {
  const root = tempDir("mailcore-docs-");
  mkdirSync(join(root, "docs"));
  writeFileSync(join(root, "docs/other.md"), "# Other\n\n## Its part\n");
  writeFileSync(
    join(root, "README.md"),
    [
      "[fine](docs/other.md#its-part) [also](docs/) [here](#readme) [site](/docs/rate-limits)",
      "[web](https://example.com/x.md) `[code](docs/none.md)`",
      "[gone](docs/none.md) [no part](docs/other.md#no-part) [out](../elsewhere/x.md)",
      "",
      "# Readme",
    ].join("\n"),
  );
  expect(brokenLinks(root, ["README.md"])).toEqual([
    "README.md: docs/none.md: no such file",
    "README.md: docs/other.md#no-part: no heading with the anchor #no-part in docs/other.md",
    "README.md: ../elsewhere/x.md leaves the repository",
  ]);
});

test("a code map's folders are its lines of two spaces and a name, not deeper lines or descriptions", () => {
  const map = [
    "cmd/        the mains",
    "  api/      the HTTP front",
    "internal/   the code",
    "  api/      the front: routes;",
    "            config/ named in a description",
    "    openapi/  a folder of a folder",
    "  bucket/",
    "docs/       this",
  ].join("\n");
  expect(codeMapFolders(map)).toEqual(
    new Map([
      ["cmd", ["api"]],
      ["internal", ["api", "bucket"]],
      ["docs", []],
    ]),
  );
});

test("a folder without files (what a rename leaves behind) is not a folder of the code", () => {
  const root = tempDir("mailcore-folders-");
  mkdirSync(join(root, "internal/empty/inner"), { recursive: true });
  mkdirSync(join(root, "internal/full/inner"), { recursive: true });
  writeFileSync(join(root, "internal/full/inner/x.ts"), "");
  expect(foldersWithFiles(root, "internal")).toEqual(["full"]);
});
