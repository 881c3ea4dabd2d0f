// The alert rules in deploy/prometheus: valid for Prometheus, each firing and not firing as its
// unit tests on synthetic series say (promtool test rules), and each with a summary and a
// runbook paragraph in docs/operations.md ("Alerts").
import { expect, test } from "bun:test";
import { spawnSync } from "bun";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "../testkit/testkit";

const RULES = "deploy/prometheus/alerts.yml";

function promtool(...args: string[]): { code: number; output: string } {
  const r = spawnSync(["promtool", ...args], { cwd: REPO_ROOT, stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode, output: r.stdout.toString() + r.stderr.toString() };
}

test("promtool check rules: the rules are valid", () => {
  const r = promtool("check", "rules", RULES);
  expect(r.output).toContain("SUCCESS");
  expect(r.code).toBe(0);
});

test("promtool test rules: each alert fires, and does not, as its tests on synthetic series say", () => {
  const r = promtool("test", "rules", "deploy/prometheus/alerts.test.yml");
  expect(r.output).toContain("SUCCESS");
  expect(r.code).toBe(0);
});

test("every alert has a summary, a severity, a runbook paragraph in docs/operations.md, and tests firing and not", () => {
  const { groups } = Bun.YAML.parse(readFileSync(join(REPO_ROOT, RULES), "utf8")) as {
    groups: { rules: { alert: string; labels: Record<string, string>; annotations: Record<string, string> }[] }[];
  };
  const docs = readFileSync(join(REPO_ROOT, "docs/operations.md"), "utf8");
  const tests = readFileSync(join(REPO_ROOT, "deploy/prometheus/alerts.test.yml"), "utf8");
  const alerts = groups.flatMap((g) => g.rules);
  expect(alerts.length).toBeGreaterThan(0);
  for (const { alert, labels, annotations } of alerts) {
    expect(annotations.summary, alert).toBeString();
    expect(["page", "ticket"], alert).toContain(labels.severity!);
    expect(annotations.runbook).toBe(`docs/operations.md#${alert.toLowerCase()}`);
    expect(docs.split("\n"), alert).toContain(`### ${alert}`);
    expect(tests, alert).toContain(`alertname: ${alert}\n        exp_alerts:\n          - exp_labels`);
    expect(tests, alert).toContain(`alertname: ${alert}\n        exp_alerts: []`);
  }
});
