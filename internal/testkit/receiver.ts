// A webhook receiver for tests and load scripts: Bun.serve on a free loopback port, recording
// every request; what it answers is up to the test, per path.

export interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
  atMs: number;
}

/**
 * The answer for a request: a status (no body) or a whole response, or a promise of either (never
 * resolved: a receiver that hangs).
 */
export type Answer = (r: Received, nth: number) => number | Response | Promise<number | Response>;

export interface Receiver {
  /** http://127.0.0.1:<port> */
  url: string;
  received: Received[];
  /** Requests so far to a path. */
  at(path: string): Received[];
  /** Sets the answer of a path (default: 200). */
  answer(path: string, a: Answer): void;
  stop(): Promise<void>;
}

export function startReceiver(): Receiver {
  const received: Received[] = [];
  const answers = new Map<string, Answer>();
  const counts = new Map<string, number>();
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      const path = new URL(req.url).pathname;
      const r: Received = { path, headers: Object.fromEntries(req.headers), body: await req.text(), atMs: Date.now() };
      received.push(r);
      const nth = (counts.get(path) ?? 0) + 1;
      counts.set(path, nth);
      const answer = await (answers.get(path) ?? (() => 200))(r, nth);
      return typeof answer === "number" ? new Response(null, { status: answer }) : answer;
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}`,
    received,
    at: (path) => received.filter((r) => r.path === path),
    answer: (path, a) => void answers.set(path, a),
    stop: () => server.stop(true),
  };
}
