// A 503 that says "not served" must mean it: limiterd paused while sends
// are in flight, then resumed; a send the API answered 503 is never queued afterwards.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { sendEmail, type Stack, startStack, waitFor } from "../testkit/testkit";

describe("limiterd paused with sends in flight", () => {
  let stack: Stack;
  let token: string;
  beforeAll(async () => {
    stack = await startStack({ env: { LANE_RATE: "1000", LIMITER_TIMEOUT_MS: "500" }, workers: 1 });
    token = await stack.org("acme", "enterprise");
  });
  afterAll(async () => {
    await stack?.stop();
  });

  test("every 202 is delivered and no 503 is", async () => {
    const answers: { to: string; status: number }[] = [];
    let n = 0;
    let running = true;
    const sendOne = async () => {
      const to = `r${n++}@dest.example`;
      const a = await sendEmail(stack.apiUrls[0]!, token, {
        from: "no-reply@acme.example",
        to,
        subject: "Deadline",
        text: "x",
      });
      answers.push({ to, status: a.status });
    };
    const loops = Array.from({ length: 12 }, async () => {
      while (running) await sendOne();
    });
    await waitFor("some sends to pass", async () => answers.filter((a) => a.status === 202).length >= 20);
    stack.limiterd.proc.kill("SIGSTOP");
    // Sends made during the pause reach the daemon, or leave the API, after their deadline
    // (the loops' own sends may all be in batches the daemon read just before it).
    const late = Array.from({ length: 12 }, sendOne);
    await Bun.sleep(1_500);
    stack.limiterd.proc.kill("SIGCONT");
    await waitFor("sends to pass again", async () => answers.slice(-5).every((a) => a.status === 202), 15_000);
    running = false;
    await Promise.all([...loops, ...late]);

    const accepted = answers.filter((a) => a.status === 202).map((a) => a.to);
    const refused = answers.filter((a) => a.status === 503).map((a) => a.to);
    expect(refused.length).toBeGreaterThan(0);
    expect(answers.every((a) => a.status === 202 || a.status === 503)).toBe(true);
    const sink = join(stack.dataDir, "sink");
    const deliveredTo = () =>
      existsSync(sink)
        ? readdirSync(sink)
            .filter((f) => f.endsWith(".eml"))
            .map((f) => /^To: (\S+)$/m.exec(readFileSync(join(sink, f), "utf8"))?.[1] ?? "")
        : [];
    await waitFor("every accepted send to be delivered", async () => deliveredTo().length >= accepted.length, 20_000);
    // What the daemon had already read before the pause is done by now; give it a moment more.
    await Bun.sleep(1_000);
    const delivered = new Set(deliveredTo());
    expect(accepted.filter((to) => !delivered.has(to))).toEqual([]);
    expect(refused.filter((to) => delivered.has(to))).toEqual([]);
  }, 60_000);
});
