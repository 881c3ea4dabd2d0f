// The one-command start (npm start runs cmd/dev): the whole service on the embedded store.
import { spawn } from "bun";
import { expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { connect } from "node:net";
import { join } from "node:path";
import { freePort, type Proc, REPO_ROOT, runBun, tempDir, waitFor } from "../testkit/testkit";

/** How the README (and npm start, once the demo organization exists) says to make another token. */
const README_TOKEN_LINE = "npx bun run cmd/admin/index.ts token create demo";

const refuses = (port: number) =>
  new Promise<boolean>((done) => {
    const s = connect({ host: "127.0.0.1", port });
    s.once("connect", () => {
      s.destroy();
      done(false);
    });
    s.once("error", () => done(true));
  });

/** An SMTP dialogue: the greeting, then each command's reply (the last line of each). */
function dialogue(port: number, commands: string[]): Promise<string[]> {
  return new Promise((done, fail) => {
    const replies: string[] = [];
    let buffered = "";
    const s = connect({ host: "127.0.0.1", port });
    s.setTimeout(5_000, () => {
      s.destroy();
      fail(new Error(`no reply after ${replies.join(" / ")}`));
    });
    s.on("error", fail);
    s.on("data", (chunk: Buffer) => {
      buffered += chunk.toString();
      for (let end = buffered.indexOf("\r\n"); end >= 0; end = buffered.indexOf("\r\n")) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (line[3] === "-") continue; // a line of a multi-line reply
        replies.push(line);
        const next = commands[replies.length - 1];
        if (next === undefined) {
          s.end();
          done(replies);
        } else s.write(`${next}\r\n`);
      }
    });
  });
}

test("cmd/dev starts limiterd, the API, the SMTP front and the inbound MX, creates the demo organization once, and Ctrl-C stops all", async () => {
  const [limiterPort, apiPort, smtpPort, inboundPort] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  const metrics = {
    LIMITER_METRICS_PORT: await freePort(),
    API_METRICS_PORT: await freePort(),
    SMTP_METRICS_PORT: await freePort(),
    WORKER_METRICS_PORT: await freePort(),
    INBOUND_METRICS_PORT: await freePort(),
  };
  const env = {
    DATA_DIR: tempDir(),
    LIMITER_PORT: String(limiterPort),
    API_PORT: String(apiPort),
    SMTP_PORT: String(smtpPort),
    INBOUND_PORT: String(inboundPort),
    ...Object.fromEntries(Object.entries(metrics).map(([k, v]) => [k, String(v)])),
  };
  const dev = runBun("cmd/dev/index.ts", [], env);
  const stacks: Proc[] = [dev];
  try {
    await waitFor("the ready banner", async () => dev.stdout().includes("Ctrl-C stops it"), 20_000);
    const curl = /curl -i (\S+) -H "Authorization: Bearer (mc_[\w-]{43})"/.exec(dev.stdout());
    expect(curl).not.toBeNull();
    const res = await fetch(curl![1]!, { headers: { Authorization: `Bearer ${curl![2]}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("RateLimit")).toBe('"free";r=99;t=1');
    // The console user as printed can sign in.
    const printed = /sign in at (\S+) as (\S+) with the password (\S+), shown once/.exec(dev.stdout());
    expect(printed).not.toBeNull();
    const form = await fetch(`${printed![1]}/sign-in`);
    const csrf = /name="csrf" value="([^"]+)"/.exec(await form.text())![1]!;
    const signedIn = await fetch(`${printed![1]}/sign-in`, {
      method: "POST",
      redirect: "manual",
      headers: {
        Cookie: form.headers.get("set-cookie")!.split(";")[0]!,
        "Content-Type": "application/x-www-form-urlencoded",
      },
      body: new URLSearchParams({ csrf, email: printed![2]!, password: printed![3]! }),
    });
    expect([signedIn.status, signedIn.headers.get("location")]).toEqual([303, "/console/tokens"]);
    // Each process's lines carry its name.
    expect(dev.stderr()).toMatch(/^limiterd +\| .*INFO: limiterd listening/m);
    expect(dev.stderr()).toMatch(/^api +\| .*INFO: api listening/m);
    expect(dev.stderr()).toMatch(/^smtp +\| .*INFO: smtp listening/m);
    expect(dev.stderr()).toMatch(/^inbound +\| .*INFO: inbound listening/m);
    // The inbound MX answers SMTP where the banner says: it takes mail for the return paths
    // only, and refuses any other recipient at RCPT.
    expect(dev.stdout()).toContain(`inbound MX     127.0.0.1:${inboundPort} (bounces to the return paths`);
    const replies = await dialogue(inboundPort, ["EHLO test", "MAIL FROM:<>", "RCPT TO:<someone@example.com>", "QUIT"]);
    expect(replies.map((r) => r.slice(0, 3))).toEqual(["220", "250", "250", "550", "221"]);
    expect(replies[3]).toStartWith("550 5.1.1");
    // Every process serves its metrics, and the banner says where.
    for (const port of Object.values(metrics)) {
      await waitFor(`metrics on ${port}`, async () => (await fetch(`http://127.0.0.1:${port}/metrics`)).ok);
      expect(dev.stdout()).toContain(`http://127.0.0.1:${port}/metrics`);
    }

    // The ready swaks line works as printed: 250 over STARTTLS with the demo token.
    const swaksLine = /^ +(swaks --server .*)$/m.exec(dev.stdout())?.[1];
    expect(swaksLine).toBe(
      `swaks --server 127.0.0.1:${smtpPort} --tls --auth-user demo --auth-password ${curl![2]} --from hello@demo.example.com --to delivered@fixtures.test`,
    );
    const swaks = spawn(swaksLine!.split(" "), { stdout: "pipe", stderr: "pipe" });
    const transcript = await new Response(swaks.stdout).text();
    expect(await swaks.exited, transcript).toBe(0);
    expect(transcript).toMatch(/^<~ +250 2\.0\.0 Queued as msg_[0-9a-f]{24} \(transactional lane\)$/m);

    // The printed send to a real address lands in the file sink, as the banner says.
    const sinkSend = /-d '(\{[^']*"to":"you@example\.com"[^']*\})'/.exec(dev.stdout());
    expect(sinkSend).not.toBeNull();
    const api = (path: string, body?: unknown) =>
      fetch(`http://127.0.0.1:${apiPort}${path}`, {
        method: "POST",
        headers: { Authorization: `Bearer ${curl![2]}`, "Content-Type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as { id: string } }));
    const sent = await api("/api/v1/emails", JSON.parse(sinkSend![1]!));
    expect(sent.status).toBe(202);
    expect(dev.stdout()).toContain(`delivered mail ${env.DATA_DIR}/sink/<id>.eml`);
    const eml = join(env.DATA_DIR, "sink", `${sent.body.id}.eml`);
    await waitFor("the message in the sink", async () => existsSync(eml));
    // Links in mail point at this API's port, not 8080: a campaign's unsubscribe link shows it.
    expect(dev.stdout()).toContain(`public URL     http://127.0.0.1:${apiPort} `);
    await api("/api/v1/subscribers", { email: "kim@example.org", tags: ["news"] });
    const campaign = await api("/api/v1/campaigns", {
      name: "News",
      from: "hello@demo.example.com",
      subject: "News",
      text: "Unsubscribe: {{unsubscribeUrl}}",
      audience: { tags: ["news"] },
    });
    expect((await api(`/api/v1/campaigns/${campaign.body.id}/send`)).status).toBe(202);
    const sink = join(env.DATA_DIR, "sink");
    const unsubscribe = () =>
      readdirSync(sink)
        .map((f) => readFileSync(join(sink, f), "utf8"))
        .map((m) => /^List-Unsubscribe: <([^>]+)>/m.exec(m)?.[1])
        .find((u) => u !== undefined);
    await waitFor("the campaign's message in the sink", async () => unsubscribe() !== undefined);
    expect(unsubscribe()).toStartWith(`http://127.0.0.1:${apiPort}/u/`);

    dev.proc.kill("SIGINT");
    expect(await dev.proc.exited).toBe(0);
    // The children are gone: their ports refuse connections.
    await expect(fetch(`http://127.0.0.1:${apiPort}/healthz`)).rejects.toThrow();
    expect(await refuses(smtpPort)).toBe(true);
    expect(await refuses(inboundPort)).toBe(true);

    // A second start keeps the data and does not create the organization again.
    const again = runBun("cmd/dev/index.ts", [], env);
    stacks.push(again);
    await waitFor("the second banner", async () => again.stdout().includes("Ctrl-C stops it"), 20_000);
    const stillValid = await fetch(curl![1]!, { headers: { Authorization: `Bearer ${curl![2]}` } });
    expect(stillValid.status).toBe(200);
    // The line it prints for a new token is the README's (with where the daemon is, off its
    // default port), and works as a user would run it: in a shell, Bun through npx.
    const tokenLine = /A new token: (.*)$/m.exec(again.stdout())?.[1];
    expect(tokenLine).toBe(`LIMITER_URL=http://127.0.0.1:${limiterPort} DATA_DIR=${env.DATA_DIR} ${README_TOKEN_LINE}`);
    expect(readFileSync(join(REPO_ROOT, "README.md"), "utf8")).toContain(`\`${README_TOKEN_LINE}\``);
    const made = spawn(["sh", "-c", tokenLine!], { cwd: REPO_ROOT, stdout: "pipe", stderr: "pipe" });
    const [newToken, why] = [await new Response(made.stdout).text(), await new Response(made.stderr).text()];
    expect(await made.exited, why).toBe(0);
    expect(newToken).toMatch(/^mc_[\w-]{43}\n$/);
    const byNewToken = await fetch(curl![1]!, { headers: { Authorization: `Bearer ${newToken.trim()}` } });
    expect(byNewToken.status).toBe(200);
    again.proc.kill("SIGTERM");
    expect(await again.proc.exited).toBe(0);
  } finally {
    // As Ctrl-C, so that a test that failed half way leaves no children behind (SIGKILL would orphan them).
    for (const stack of stacks)
      await Promise.race([stack.stop("SIGINT"), Bun.sleep(5_000)]).then(() => stack.stop("SIGKILL"));
  }
});
