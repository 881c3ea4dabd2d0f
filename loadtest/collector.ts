// A tally server for k6 runs: VUs share no state, so they add their counts here and the
// script's teardown reads the sums back. Counts add up; firstStart/firstEnd keep the
// smallest value seen, lastStart/lastEnd the largest.

export type Tally = Record<string, number>;

export function mergeTally(into: Tally, add: Tally): Tally {
  for (const [k, v] of Object.entries(add)) {
    if (typeof v !== "number" || !Number.isFinite(v)) continue;
    if (k.startsWith("first")) into[k] = Math.min(into[k] ?? Number.POSITIVE_INFINITY, v);
    else if (k.startsWith("last")) into[k] = Math.max(into[k] ?? Number.NEGATIVE_INFINITY, v);
    else into[k] = (into[k] ?? 0) + v;
  }
  return into;
}

export function startCollector(): { url: string; tallies: Map<string, Tally>; stop(): void } {
  const tallies = new Map<string, Tally>();
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      const name = new URL(req.url).pathname.replace(/^\/tally\//, "");
      if (req.method === "POST") {
        tallies.set(name, mergeTally(tallies.get(name) ?? {}, (await req.json()) as Tally));
        return new Response(null, { status: 204 });
      }
      return Response.json(tallies.get(name) ?? {});
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, tallies, stop: () => server.stop(true) };
}
