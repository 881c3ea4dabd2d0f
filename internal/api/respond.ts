import type { Admission } from "../limiterclient/client";
import { MAX_BODY_BYTES } from "../limits/limits";
import { allowOf } from "../web/routes";
import { TICKET_HEADER } from "../wire/metadata";
import type { ApiPorts } from "./ports";

// What every route handler of the API shares: the admitted request it is given, and the JSON
// answers and body reading of /api/v1.

export type Headers_ = Record<string, string>;

/** An admitted request of an organization, as the route handlers see it. */
export interface Admitted {
  req: Request;
  requestId: string;
  admission: Admission;
  headers: Headers_;
  /** The path's captured parts. */
  params: string[];
  /** The OpenAPI document's check of this operation's JSON body; throws InvalidField. */
  checkBody(value: unknown): void;
}

/** A call's options: its deadline, and the metadata it carries. */
export interface CallOptions {
  timeoutMs: number;
  headers?: Record<string, string>;
}

/** A call's options with the admission ticket of the organization it is for. */
export function ticketed(o: CallOptions, ticket: string): CallOptions {
  return { ...o, headers: { ...o.headers, [TICKET_HEADER]: ticket } };
}

/** The front a handler serves in: its ports, and the options of the request's calls to the daemon. */
export interface Front {
  ports: ApiPorts;
  /**
   * The options of the request's record-bound calls (and the activity log's): the deadline (a
   * batch of 1,000 writes takes longer than an admission) and, for an admitted request, its
   * admission ticket, which names the organization to the daemon (serveRoute adds it).
   */
  records: CallOptions;
}

/** One method of a path: the front it serves in and the admitted request, to the answer. */
export type Handler = (front: Front, a: Admitted) => Promise<Response>;

/** A path's handlers by method. */
export type Route = Partial<Record<string, Handler>>;

/** A time of the daemon's (milliseconds since the epoch) as the API writes times. */
export const iso = (ms: bigint) => new Date(Number(ms)).toISOString();

export function json(status: number, body: unknown, headers: Headers_ = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { ...headers, "Content-Type": "application/json" } });
}

export function error(status: number, code: string, message: string, headers: Headers_ = {}): Response {
  return json(status, { code, message }, headers);
}

/** 405: the path does not serve the request's method; Allow lists those it does. */
export function methodNotAllowed(req: Request, path: string, methods: readonly string[], headers: Headers_ = {}) {
  return error(405, "METHOD_NOT_ALLOWED", `${path} does not accept ${req.method}.`, {
    ...headers,
    Allow: allowOf(methods),
  });
}

/**
 * A path served by GET alone: HEAD gets the same answer (Bun sends its headers without the
 * body), any other method 405.
 */
export function getOnly<R extends Response | Promise<Response>>(
  req: Request,
  path: string,
  serve: () => R,
): R | Response {
  return req.method === "GET" || req.method === "HEAD" ? serve() : methodNotAllowed(req, path, ["GET"]);
}

/** 422: the field named is invalid. */
export function invalid(field: string, message: string, headers: Headers_): Response {
  return json(422, { code: "VALIDATION_FAILED", message, field }, headers);
}

/** Reads a JSON body of at most MAX_BODY_BYTES; a Response when it cannot. */
export async function readJson(req: Request, headers: Headers_): Promise<unknown | Response> {
  const type = req.headers.get("content-type") ?? "";
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    return error(415, "UNSUPPORTED_MEDIA_TYPE", "Send the body as Content-Type: application/json.", headers);
  }
  const tooLarge = () => error(413, "PAYLOAD_TOO_LARGE", `The body is larger than ${MAX_BODY_BYTES} bytes.`, headers);
  if (Number(req.headers.get("content-length") ?? 0) > MAX_BODY_BYTES) return tooLarge();
  const body = await req.arrayBuffer();
  if (body.byteLength > MAX_BODY_BYTES) return tooLarge();
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch {
    return error(400, "INVALID_JSON", "The body is not valid UTF-8 JSON.", headers);
  }
}
