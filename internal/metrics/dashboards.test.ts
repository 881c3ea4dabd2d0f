// The dashboard and the alert rules in deploy/ read only metrics that a process exports: every
// metric name in their expressions is one the metrics module registers (with the default
// process metrics), so renaming a metric breaks this test rather than a graph or an alert.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../testkit/testkit";
import {
  apiMetrics,
  certificateExpiry,
  limiterMetrics,
  mxMetrics,
  newRegistry,
  smtpMetrics,
  workerMetrics,
} from "./metrics";

/** Series Prometheus makes itself for each scrape target. */
const PROMETHEUS_SERIES = ["up"];

/** Every series name a process serves: each metric, with a histogram's and a summary's own series. */
async function exportedNames(): Promise<Set<string>> {
  const registries = [newRegistry("api"), newRegistry("limiterd"), newRegistry("smtp"), newRegistry("worker")];
  const [api, limiterd, smtp, worker] = registries;
  apiMetrics(api!);
  limiterMetrics(limiterd!, { lanes: async () => [], ready: async () => true, dkimFailing: async () => 0 });
  smtpMetrics(smtp!);
  workerMetrics(worker!);
  mxMetrics(worker!, () => []);
  for (const registry of registries) certificateExpiry(registry, {});
  const names = new Set<string>();
  for (const registry of registries)
    for (const m of await registry.getMetricsAsJSON()) {
      names.add(m.name);
      const type = String(m.type);
      if (type === "histogram") for (const s of ["_bucket", "_sum", "_count"]) names.add(m.name + s);
      if (type === "summary") for (const s of ["_sum", "_count"]) names.add(m.name + s);
    }
  return names;
}

const KEYWORDS = new Set(["and", "or", "unless", "bool", "offset"]);

/** The metric names a PromQL expression reads: what is left once strings, matchers, label lists, ranges and calls are taken out. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, " ")
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, " ")
    .replace(/\[[^\]]*\]/g, " ");
  return [...bare.matchAll(/(?<![\w.:$])[a-zA-Z_:][\w:]*(?![\w:]|\s*\()/g)]
    .map((m) => m[0])
    .filter((name) => !KEYWORDS.has(name));
}

interface Panel {
  panels?: Panel[];
  targets?: { expr: string }[];
}
const panelExprs = (panels: Panel[]): string[] =>
  panels.flatMap((p) => [...(p.targets ?? []).map((t) => t.expr), ...panelExprs(p.panels ?? [])]);

const dashboard = () =>
  JSON.parse(readFileSync(join(REPO_ROOT, "deploy/grafana/mailcore.json"), "utf8")) as { panels: Panel[] };
const ruleExprs = () =>
  (
    Bun.YAML.parse(readFileSync(join(REPO_ROOT, "deploy/prometheus/alerts.yml"), "utf8")) as {
      groups: { rules: { expr: string }[] }[];
    }
  ).groups.flatMap((g) => g.rules.map((r) => r.expr));

test("metric names are read from PromQL, not its functions, labels, keywords or ranges", () => {
  expect(
    metricNames(
      'histogram_quantile(0.99, sum by (le, route) (rate(a_bucket{route=~"x|y"}[5m]))) / on(job) b - time() > 14 * 86400 and bool c',
    ),
  ).toEqual(["a_bucket", "b", "c"]);
});

test("the dashboard is JSON with panels, each with an expression", () => {
  const d = dashboard();
  const exprs = panelExprs(d.panels);
  expect(exprs.length).toBeGreaterThan(10);
  for (const expr of exprs) expect(metricNames(expr).length).toBeGreaterThan(0);
});

test("every metric of the dashboard and the alert rules is one a process exports", async () => {
  const exported = await exportedNames();
  expect(exported).toContain("process_cpu_seconds_total");
  const known = new Set([...exported, ...PROMETHEUS_SERIES]);
  const unknown = [...panelExprs(dashboard().panels), ...ruleExprs()]
    .flatMap(metricNames)
    .filter((name) => !known.has(name));
  expect(unknown).toEqual([]);
});
