// The one-command start (npm start runs cmd/dev): the whole service on the embedded store.
import { expect, test } from "bun:test";
import { freePort, runBun, tempDir, waitFor } from "../testkit/testkit";

test("cmd/dev starts limiterd and the API, creates the demo organization once, and Ctrl-C stops all", async () => {
  const [limiterPort, apiPort] = [await freePort(), await freePort()];
  const env = { DATA_DIR: tempDir(), LIMITER_PORT: String(limiterPort), API_PORT: String(apiPort) };
  const dev = runBun("cmd/dev/index.ts", [], env);
  try {
    await waitFor("the ready banner", async () => dev.stdout().includes("Ctrl-C stops it"), 20_000);
    const curl = /curl -i (\S+) -H "Authorization: Bearer (mc_[\w-]{43})"/.exec(dev.stdout());
    expect(curl).not.toBeNull();
    const res = await fetch(curl![1]!, { headers: { Authorization: `Bearer ${curl![2]}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("RateLimit")).toBe('"free";r=99;t=1');
    // Each process's lines carry its name.
    expect(dev.stderr()).toMatch(/^limiterd +\| .* info limiterd listening/m);
    expect(dev.stderr()).toMatch(/^api +\| .* info api listening/m);

    dev.proc.kill("SIGINT");
    expect(await dev.proc.exited).toBe(0);
    // Both children are gone: their ports refuse connections.
    await expect(fetch(`http://127.0.0.1:${apiPort}/healthz`)).rejects.toThrow();

    // A second start keeps the data and does not create the organization again.
    const again = runBun("cmd/dev/index.ts", [], env);
    await waitFor("the second banner", async () => again.stdout().includes("Ctrl-C stops it"), 20_000);
    expect(again.stdout()).toContain('Organization "demo" exists');
    const stillValid = await fetch(curl![1]!, { headers: { Authorization: `Bearer ${curl![2]}` } });
    expect(stillValid.status).toBe(200);
    again.proc.kill("SIGTERM");
    expect(await again.proc.exited).toBe(0);
  } finally {
    await dev.stop("SIGKILL");
  }
});
