import type { MessageInitShape } from "@bufbuild/protobuf";
import { type SubscriberChangeSchema, SubscriberStatus } from "../gen/mailcore/limiter/v1/audience_pb";
import { InvalidField } from "./invalid_field";

// The bodies of the audience endpoints, validated into what the daemon takes. A refusal is
// InvalidField (422 with `field`).

export type ChangeInit = MessageInitShape<typeof SubscriberChangeSchema>;

/** A tag's name: 1 to 64 letters, digits, spaces, `_` and `-`. */
export const TAG_NAME = /^[\p{L}\p{N} _-]{1,64}$/u;
const FIELD_KEY = /^[A-Za-z0-9_-]{1,64}$/;
export const MAX_FIELDS = 50;
export const MAX_BATCH = 1_000;
const MAX_TAGS = 100;
const MAX_NAME = 256;
/** The longest address a subscriber may have. */
export const MAX_EMAIL = 254;
const MAX_FIELD_STRING = 4_096;
/**
 * A subscriber's address: a dot-atom local part (UTF-8 allowed, at most 64 characters) at a
 * host name of at least two labels. Stricter than a send's address on purpose: no display
 * name, comments, quoted local parts or address literals. A pattern, not the RFC 5322 parser,
 * which takes up to a quarter of a second on 254 hostile characters (nested comments, runs of
 * dots): a batch of a thousand would hold the event loop for minutes.
 */
const ATEXT = "[\\p{L}\\p{N}\\p{M}!#$%&'*+/=?^_`{|}~-]+";
const LABEL = "[\\p{L}\\p{N}](?:[\\p{L}\\p{N}\\p{M}-]*[\\p{L}\\p{N}\\p{M}])?";
/**
 * The address as kept (lower-cased), as a pattern (unanchored): without the local part's limit,
 * which lower-casing can exceed ("İ" becomes two characters).
 */
export const KEPT_ADDRESS = `${ATEXT}(?:\\.${ATEXT})*@${LABEL}(?:\\.${LABEL})+`;
/** The local part's limit. */
export const MAX_LOCAL_PART = 64;
const ADDRESS = new RegExp(`^(?=[^@]{1,${MAX_LOCAL_PART}}@)${KEPT_ADDRESS}$`, "u");

const CHANGE_FIELDS = ["name", "fields", "tags", "status", "replaceTags", "resubscribe", "triggerWorkflows"];
const UPSERT_FIELDS = new Set(["email", ...CHANGE_FIELDS]);
const PATCH_FIELDS = new Set(CHANGE_FIELDS);
const STATUSES: Partial<Record<string, SubscriberStatus>> = {
  subscribed: SubscriberStatus.SUBSCRIBED,
  unsubscribed: SubscriberStatus.UNSUBSCRIBED,
};

function object(field: string, value: unknown): Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new InvalidField(field, "must be a JSON object");
  return value as Record<string, unknown>;
}

function only(body: Record<string, unknown>, allowed: Set<string>, prefix = ""): void {
  const unknown = Object.keys(body).find((k) => !allowed.has(k));
  if (unknown !== undefined) throw new InvalidField(`${prefix}${unknown}`, "is not a field of this endpoint");
}

function optionalBool(field: string, value: unknown): boolean | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "boolean") throw new InvalidField(field, "must be true or false");
  return value;
}

/** A bare email address (no display name), as subscribers are kept: trimmed. */
export function subscriberEmail(field: string, value: unknown): string {
  if (typeof value !== "string" || value.trim() === "") throw new InvalidField(field, "is required: an email address");
  const email = value.trim();
  if (email.length > MAX_EMAIL) throw new InvalidField(field, `must be at most ${MAX_EMAIL} characters`);
  if (!ADDRESS.test(email))
    throw new InvalidField(
      field,
      `${JSON.stringify(value)} is not an email address (one bare address: local@host.example)`,
    );
  return email;
}

export function subscriberStatus(field: string, value: unknown): SubscriberStatus {
  const status = typeof value === "string" ? STATUSES[value] : undefined;
  if (status === undefined) throw new InvalidField(field, 'must be "subscribed" or "unsubscribed"');
  return status;
}

export function tagName(field: string, value: unknown): string {
  if (typeof value !== "string" || !TAG_NAME.test(value))
    throw new InvalidField(
      field,
      `${JSON.stringify(value)} is not a tag name (1 to 64 letters, digits, spaces, _ and -)`,
    );
  return value;
}

export function tagList(field: string, value: unknown): string[] {
  if (!Array.isArray(value) || value.length > MAX_TAGS)
    throw new InvalidField(field, `must be a list of at most ${MAX_TAGS} tag names`);
  return value.map((t) => tagName(field, t));
}

function fieldsJson(prefix: string, value: unknown): string {
  if (value === undefined || value === null) return "";
  const fields = object(`${prefix}fields`, value);
  const entries = Object.entries(fields);
  if (entries.length > MAX_FIELDS) throw new InvalidField(`${prefix}fields`, `at most ${MAX_FIELDS} fields`);
  for (const [key, v] of entries) {
    if (!FIELD_KEY.test(key))
      throw new InvalidField(`${prefix}fields.${key}`, "is not a field name (1 to 64 letters, digits, _ and -)");
    const scalar =
      v === null ||
      typeof v === "boolean" ||
      (typeof v === "number" && Number.isFinite(v)) ||
      (typeof v === "string" && v.length <= MAX_FIELD_STRING);
    if (!scalar)
      throw new InvalidField(
        `${prefix}fields.${key}`,
        `must be a string (up to ${MAX_FIELD_STRING} characters), a number, true, false or null`,
      );
  }
  return JSON.stringify(fields);
}

/** The switches and parts shared by an upsert and a partial update. */
function change(b: Record<string, unknown>, prefix: string, triggerDefault: boolean): ChangeInit {
  if (
    b.name !== undefined &&
    b.name !== null &&
    (typeof b.name !== "string" || b.name.length > MAX_NAME || /[\r\n]/.test(b.name))
  ) {
    throw new InvalidField(`${prefix}name`, `must be one line of at most ${MAX_NAME} characters`);
  }
  const status =
    b.status === undefined || b.status === null
      ? SubscriberStatus.UNSPECIFIED
      : subscriberStatus(`${prefix}status`, b.status);
  const tags = b.tags === undefined || b.tags === null ? undefined : tagList(`${prefix}tags`, b.tags);
  return {
    name: typeof b.name === "string" ? b.name : undefined,
    fieldsJson: fieldsJson(prefix, b.fields),
    tags: tags ?? [],
    status,
    // replaceTags without tags leaves the tags as they are.
    replaceTags: (optionalBool(`${prefix}replaceTags`, b.replaceTags) ?? false) && tags !== undefined,
    resubscribe: optionalBool(`${prefix}resubscribe`, b.resubscribe) ?? false,
    triggerWorkflows: optionalBool(`${prefix}triggerWorkflows`, b.triggerWorkflows) ?? triggerDefault,
  };
}

/** The body of POST /api/v1/subscribers, or one item of a batch (prefix names it: "subscribers[3]."). */
export function parseUpsert(body: unknown, prefix = "", triggerDefault = true): ChangeInit {
  const b = object(prefix ? prefix.slice(0, -1) : "body", body);
  only(b, UPSERT_FIELDS, prefix);
  return { ...change(b, prefix, triggerDefault), email: subscriberEmail(`${prefix}email`, b.email) };
}

/** The body of PATCH /api/v1/subscribers/{id or email}: the upsert's parts and switches, no email. */
export function parsePatch(body: unknown): ChangeInit {
  const b = object("body", body);
  if ("email" in b) throw new InvalidField("email", "cannot be changed; upsert the new address instead");
  only(b, PATCH_FIELDS);
  return change(b, "", true);
}

export type BatchItem = { ok: true; change: ChangeInit } | { ok: false; email: string | null; error: InvalidField };

/** The body of POST /api/v1/subscribers/batch: each item validated alone, in order. */
export function parseBatch(body: unknown): BatchItem[] {
  const b = object("body", body);
  only(b, new Set(["subscribers", "triggerWorkflows"]));
  const trigger = optionalBool("triggerWorkflows", b.triggerWorkflows) ?? true;
  if (!Array.isArray(b.subscribers) || b.subscribers.length === 0 || b.subscribers.length > MAX_BATCH) {
    throw new InvalidField("subscribers", `must be a list of 1 to ${MAX_BATCH} subscribers`);
  }
  return b.subscribers.map((item: unknown, i: number) => {
    try {
      return { ok: true, change: parseUpsert(item, `subscribers[${i}].`, trigger) };
    } catch (err) {
      if (!(err instanceof InvalidField)) throw err;
      const email = (item as { email?: unknown } | null)?.email;
      return { ok: false, email: typeof email === "string" ? email : null, error: err };
    }
  });
}

/** The body of POST and DELETE /api/v1/subscribers/{id or email}/tags. */
export function parseTagsBody(body: unknown): { tags: string[]; triggerWorkflows: boolean } {
  const b = object("body", body);
  only(b, new Set(["tags", "triggerWorkflows"]));
  if (b.tags === undefined) throw new InvalidField("tags", "is required: a list of tag names");
  return {
    tags: tagList("tags", b.tags),
    triggerWorkflows: optionalBool("triggerWorkflows", b.triggerWorkflows) ?? true,
  };
}

/** The body of POST /api/v1/tags: the tag's name. */
export function parseTagCreate(body: unknown): string {
  const b = object("body", body);
  only(b, new Set(["name"]));
  return tagName("name", b.name);
}
