// The import graph is the runtime graph: each front loads only its own code, the daemon's
// client, the generated contracts and the shared low modules; the daemon does not import its
// own client; no production file imports test helpers; and no files, nor folders, import each
// other around a loop.
import { expect, test } from "bun:test";
import { importCycles, productionImportGraph, runtimeImports } from "./imports";

/** What a front may load beside its own folders: the daemon's client and the wire contracts. */
const CLIENT_SIDE = ["internal/limiterclient", "internal/gen", "internal/wire"];
/** The low modules any process may load: none of them reaches daemon or front code. */
const SHARED = [
  "internal/automation",
  "internal/batch",
  "internal/clientip",
  "internal/config",
  "internal/datadir",
  "internal/diskspace",
  "internal/limits",
  "internal/log",
  "internal/mail",
  "internal/markdown",
  "internal/metrics",
  "internal/plane",
  "internal/plans",
  "internal/secretfile",
  "internal/shutdown",
  "internal/token",
  "internal/webhooks",
  "internal/workerpool",
];

const folderOf = (file: string) => file.split("/").slice(0, 2).join("/");

/** The folders a process loads at run time that are not among `allowed`. */
function foldersBeyond(entry: string, allowed: string[]): string[] {
  const folders = new Set(runtimeImports(entry).map(folderOf));
  return [...folders].filter((f) => !allowed.includes(f)).sort();
}

const graph = productionImportGraph();
const importsOf = (filter: (file: string) => boolean, target: RegExp) =>
  [...graph]
    .filter(([file]) => filter(file))
    .flatMap(([file, imports]) => imports.filter((i) => target.test(i)).map((i) => `${file} -> ${i}`));

test("the API process loads its own folders, the daemon's client, the contracts and shared modules: no daemon code, no SMTP front, no test helpers", () => {
  expect(runtimeImports("cmd/api/index.ts")).toContain("internal/limiterclient/client.ts");
  const own = ["cmd/api", "internal/api", "internal/site", "internal/console", "internal/web"];
  expect(foldersBeyond("cmd/api/index.ts", [...own, ...CLIENT_SIDE, ...SHARED])).toEqual([]);
});

test("the SMTP process loads its own folder, the daemon's client, the contracts and shared modules: no daemon code, no API front, no test helpers", () => {
  expect(runtimeImports("cmd/smtp/index.ts")).toContain("internal/limiterclient/client.ts");
  const own = ["cmd/smtp", "internal/smtp"];
  expect(foldersBeyond("cmd/smtp/index.ts", [...own, ...CLIENT_SIDE, ...SHARED])).toEqual([]);
});

test("the daemon imports nothing from its own client", () => {
  const daemon = (file: string) => /^(internal\/daemon|cmd\/limiterd)\//.test(file);
  expect(importsOf(daemon, /^internal\/limiterclient\//)).toEqual([]);
});

test("the hot store imports nothing from the records: the shapes both pass around live in internal/model", () => {
  const hotStore = (file: string) => file.startsWith("internal/hotstore/");
  expect(importsOf(hotStore, /^internal\/records\//)).toEqual([]);
});

test("no production file imports the test helpers", () => {
  expect(importsOf(() => true, /^internal\/testkit\//)).toEqual([]);
});

test("no production files import each other around a loop", () => {
  expect(importCycles(graph)).toEqual([]);
});

test("no production folders import each other around a loop", () => {
  const folders = new Map<string, string[]>();
  for (const [file, imports] of graph) {
    const from = folderOf(file);
    const to = new Set(folders.get(from));
    for (const i of imports) if (folderOf(i) !== from) to.add(folderOf(i));
    folders.set(from, [...to].sort());
  }
  expect(importCycles(folders)).toEqual([]);
});
