// Per-destination limits under the lanes' pacing: how many connections at once, how many
// messages on one connection, how many a minute, and whether TLS is required, by MX host
// suffix, from a JSON file the operator can replace (MX_SHAPING_FILE; shaping.json beside this
// file by default). Replies that say "you send too fast" slow a destination down for a while.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import Ajv2020 from "ajv/dist/2020";
import { ConfigError } from "../config/config";

export interface Limits {
  connections: number;
  messagesPerConnection: number;
  messagesPerMinute: number;
  tlsRequired: boolean;
}

export interface ShapingRule {
  name: string;
  mxSuffixes: string[];
  limits: Limits;
}

export interface Shaping {
  default: Limits;
  rules: ShapingRule[];
  /** Replies that mean the destination wants us slower. */
  rateLimitReplies: RegExp[];
  /** The limits of a slowed destination (each no higher than its own), and for how long. */
  slowdown: { forMs: number; connections: number; messagesPerMinute: number };
}

export const DEFAULT_SHAPING_FILE = join(import.meta.dir, "shaping.json");

/** A shaping file that cannot be used: a ConfigError, so a process that loads it at start exits with its one line. */
export class ShapingError extends ConfigError {}

const count = { type: "integer", minimum: 1, maximum: 1_000_000 };
const limitFields = {
  connections: { type: "integer", minimum: 1, maximum: 1_000 },
  messagesPerConnection: count,
  messagesPerMinute: count,
  tlsRequired: { type: "boolean" },
};
const SCHEMA = {
  type: "object",
  additionalProperties: false,
  required: ["default", "rules", "rateLimitReplies", "slowdown"],
  properties: {
    about: { type: "string" },
    default: {
      type: "object",
      additionalProperties: false,
      required: Object.keys(limitFields),
      properties: limitFields,
    },
    rules: {
      type: "array",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["name", "mxSuffixes"],
        properties: {
          name: { type: "string", minLength: 1 },
          mxSuffixes: {
            type: "array",
            minItems: 1,
            items: { type: "string", pattern: "^\\.?[A-Za-z0-9-]+(\\.[A-Za-z0-9-]+)*$" },
          },
          ...limitFields,
        },
      },
    },
    rateLimitReplies: { type: "array", items: { type: "string", minLength: 1 } },
    slowdown: {
      type: "object",
      additionalProperties: false,
      required: ["minutes", "connections", "messagesPerMinute"],
      properties: { minutes: count, connections: limitFields.connections, messagesPerMinute: count },
    },
  },
} as const;

interface ShapingFile {
  default: Limits;
  rules: ({ name: string; mxSuffixes: string[] } & Partial<Limits>)[];
  rateLimitReplies: string[];
  slowdown: { minutes: number; connections: number; messagesPerMinute: number };
}

const validate = new Ajv2020({ allErrors: true }).compile<ShapingFile>(SCHEMA);

/** The shaping in a JSON document; a ShapingError naming the source and what is wrong. */
export function parseShaping(doc: unknown, source: string): Shaping {
  if (!validate(doc)) {
    const errors = validate.errors!.map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ");
    throw new ShapingError(`${source}: ${errors}`);
  }
  const rateLimitReplies = doc.rateLimitReplies.map((p) => {
    try {
      return new RegExp(p, "i");
    } catch (err) {
      throw new ShapingError(`${source}: rateLimitReplies: ${(err as Error).message}`);
    }
  });
  return {
    default: doc.default,
    rules: doc.rules.map(({ name, mxSuffixes, ...limits }) => ({
      name,
      mxSuffixes: mxSuffixes.map((s) => s.toLowerCase()),
      limits: { ...doc.default, ...limits },
    })),
    rateLimitReplies,
    slowdown: {
      forMs: doc.slowdown.minutes * 60_000,
      connections: doc.slowdown.connections,
      messagesPerMinute: doc.slowdown.messagesPerMinute,
    },
  };
}

/** The shaping file at path (the repository's default when undefined). */
export function loadShaping(path: string = DEFAULT_SHAPING_FILE): Shaping {
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new ShapingError(`${path}: ${(err as Error).message}`);
  }
  return parseShaping(doc, path);
}

/** Whether a host name ends with a suffix: ".google.com" covers "aspmx.l.google.com"; "mx.example" covers itself and the names below it. */
export function hasSuffix(host: string, suffix: string): boolean {
  const name = host.toLowerCase().replace(/\.$/, "");
  if (suffix.startsWith(".")) return name.endsWith(suffix);
  return name === suffix || name.endsWith(`.${suffix}`);
}

/** The rule of a destination: the first rule that matches its most preferred host that any rule matches; else the default. */
export function ruleFor(shaping: Shaping, hosts: string[]): { name: string; limits: Limits } {
  for (const host of hosts) {
    const rule = shaping.rules.find((r) => r.mxSuffixes.some((s) => hasSuffix(host, s)));
    if (rule) return rule;
  }
  return { name: "default", limits: shaping.default };
}
