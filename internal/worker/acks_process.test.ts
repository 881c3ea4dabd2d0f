// A delivery whose ack cannot reach limiterd : the worker keeps the ack
// until it is accepted, on disk, so an outage longer than a few seconds, or a worker killed
// meanwhile, does not deliver the message twice.
import { afterEach, describe, expect, test } from "bun:test";
import { type Relay, startRelay } from "../testkit/relay";
import { runBun, sendEmail, type Stack, startStack, waitFor } from "../testkit/testkit";

// Long enough that a limiterd restart on a busy machine (several seconds) comes back before it.
const VISIBILITY_MS = 15_000;

async function status(stack: Stack, token: string, id: string): Promise<{ status: string; attempts: number }> {
  return (await (
    await fetch(`${stack.apiUrls[0]}/api/v1/emails/${id}`, { headers: { Authorization: `Bearer ${token}` } })
  ).json()) as { status: string; attempts: number };
}

describe("acks through a limiterd outage", () => {
  let relay: Relay;
  let stack: Stack;
  afterEach(async () => {
    await stack?.stop();
    await relay?.stop();
  });

  /** Sends one held message, takes limiterd down while the relay holds it, then lets the relay accept it. */
  async function deliverDuringOutage(slug: string) {
    relay = await startRelay();
    stack = await startStack({ env: { VISIBILITY_TIMEOUT_MS: String(VISIBILITY_MS) } });
    const token = await stack.org(slug, "premium");
    const worker = stack.startWorker({ SMTP_RELAY_URL: relay.url });
    const sent = await sendEmail(stack.apiUrls[0]!, token, {
      from: `no-reply@${slug}.example`,
      to: "hold@dest.example",
      subject: "Once",
      text: "x",
    });
    expect(sent.status).toBe(202);
    const id = sent.body.id as string;
    await waitFor("the relay to hold the message", async () => relay.held() === 1, 10_000);
    const leasedAt = Date.now();
    await stack.limiterd.stop("SIGKILL");
    relay.releaseHeld(); // delivered; the ack has nowhere to go
    await waitFor("the delivery", async () => relay.received.length === 1);
    return { token, id, worker, leasedAt };
  }

  const restartLimiterd = () => {
    stack.limiterd = runBun("cmd/limiterd/index.ts", [], stack.env);
  };

  test("a 5 s outage: the ack is kept and accepted afterwards; the message is delivered once", async () => {
    const { token, id, leasedAt } = await deliverDuringOutage("outage");
    await Bun.sleep(5_000);
    restartLimiterd();
    await waitFor("delivered", async () => (await status(stack, token, id)).status === "delivered", 15_000);
    // Past the lease's visibility timeout: nothing is released again.
    await Bun.sleep(Math.max(0, leasedAt + VISIBILITY_MS + 2_000 - Date.now()));
    expect(await status(stack, token, id)).toMatchObject({ status: "delivered", attempts: 1 });
    expect(relay.received).toHaveLength(1);
  }, 60_000);

  test("the worker killed with the ack pending: the next worker sends it", async () => {
    const { token, id, worker, leasedAt } = await deliverDuringOutage("restart");
    await Bun.sleep(500); // the ack's first tries fail and it is on disk
    await worker.stop("SIGKILL");
    restartLimiterd();
    stack.startWorker({ SMTP_RELAY_URL: relay.url });
    await waitFor(
      "delivered",
      async () => (await status(stack, token, id).catch(() => ({ status: "" }))).status === "delivered",
      15_000,
    );
    await Bun.sleep(Math.max(0, leasedAt + VISIBILITY_MS + 2_000 - Date.now()));
    expect(await status(stack, token, id)).toMatchObject({ status: "delivered", attempts: 1 });
    expect(relay.received).toHaveLength(1);
  }, 60_000);
});
