import { readFileSync } from "node:fs";
import { join } from "node:path";

// The TypeScript side of prelude.lua: the key layout, status codes and verdicts are read from
// the prelude itself, so a key is spelled in one place (the prelude), never rebuilt by hand.

const PRELUDE = readFileSync(join(import.meta.dir, "prelude.lua"), "utf8");

function table(name: string): Map<string, string> {
  const entries = new Map<string, string>();
  for (const m of PRELUDE.matchAll(new RegExp(`^${name}\\.(\\w+) = ('[^']*'|\\d+)`, "gm")))
    entries.set(m[1]!, m[2]!.replace(/^'|'$/g, ""));
  return entries;
}

/** Each key template (K.<name>) split at its %s holes, once: a key is built on every admission. */
const templates = new Map([...table("K")].map(([name, template]) => [name, template.split("%s")]));

/** Fills a prelude key template (K.<name>) with its parts, as the Lua key() does. */
function key(name: string, ...parts: (string | number)[]): string {
  const pieces = templates.get(name);
  if (pieces === undefined) throw new Error(`prelude.lua defines no key ${name}`);
  if (pieces.length !== parts.length + 1)
    throw new Error(`key ${name} takes ${pieces.length - 1} parts, not ${parts.length}`);
  let out = pieces[0]!;
  for (let i = 0; i < parts.length; i++) out += parts[i]! + pieces[i + 1]!;
  return out;
}

export const keys = {
  token: (hash: string) => key("token", hash),
  org: (orgId: string) => key("org", orgId),
  orgBucket: (orgId: string) => key("orgBucket", orgId),
  ipBucket: (ip: string) => key("ipBucket", ip),
  idempotency: (orgId: string, keyHash: string) => key("idempotency", orgId, keyHash),
  guardLog: (orgId: string, mailbox: string) => key("guardLog", orgId, mailbox),
  cooldown: (mailbox: string) => key("cooldown", mailbox),
  message: (orgId: string, id: string) => key("message", orgId, id),
  events: (orgId: string, id: string) => key("events", orgId, id),
  attempts: (orgId: string, id: string) => key("attempts", orgId, id),
  orgQueue: (orgId: string, lane: number) => key("orgQueue", lane, orgId),
  roster: (lane: number) => key("roster", lane),
  ready: (lane: number) => key("ready", lane),
  depth: (lane: number) => key("depth", lane),
  slots: (lane: number) => key("slots", lane),
  inFlight: (lane: number) => key("inFlight", lane),
  deferred: (lane: number) => key("deferred", lane),
  lease: (name: string) => key("lease", name),
  outbox: () => key("outbox"),
  laneHolds: (lane: number) => key("laneHolds", lane),
  signals: () => key("signals"),
  keptAck: (orgId: string, id: string) => key("keptAck", orgId, id),
  held: (orgId: string) => key("held", orgId),
  refusals: (orgId: string, minute: number) => key("refusals", orgId, minute),
  sending: (orgId: string) => key("sending", orgId),
};

/** A numeric table of the prelude (S: message statuses, V: admission verdicts). */
export function codes(name: "S" | "V"): Map<string, number> {
  return new Map([...table(name)].map(([k, v]) => [k, Number(v)]));
}

/** A script with the prelude in front of it, as Redis runs it. */
export function script(name: string): string {
  return `${PRELUDE}\n${readFileSync(join(import.meta.dir, `${name}.lua`), "utf8")}`;
}
