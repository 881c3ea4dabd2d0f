// The typed client of the HTTP API, for applications: `import { MailcoreClient } from "mailcore/client"`.
// Its types and its table of operations are generated from the OpenAPI document (gen/, by
// generate.ts), so every operation is typed by the document the API serves. It imports nothing
// else, so an application installs no dependency with it.
import { OPERATIONS } from "./gen/operations";
import type { operations } from "./gen/schema";

export type { components, operations, paths } from "./gen/schema";

/** An operation's id in the OpenAPI document, e.g. "sendEmail". */
export type OperationId = keyof typeof OPERATIONS & keyof operations;

type Operation<K extends OperationId> = operations[K];
type Empty = Record<never, never>;
type ParametersOf<K extends OperationId> = Operation<K> extends { parameters: infer P } ? P : Empty;
type Body<K extends OperationId> =
  Operation<K> extends { requestBody: { content: { "application/json": infer B } } }
    ? { body: B }
    : Required<Operation<K>> extends { requestBody: { content: { "application/json": infer B } } }
      ? { body?: B }
      : Empty;

/** What an operation takes: its path, query and header parameters and its JSON body, as the document says. */
export type RequestInput<K extends OperationId> = ParametersOf<K> & Body<K>;

type Responses<K extends OperationId> = Operation<K>["responses"];
type SuccessStatus<K extends OperationId> = Extract<keyof Responses<K>, 200 | 201 | 202 | 204>;
type ErrorStatus<K extends OperationId> = Exclude<keyof Responses<K>, SuccessStatus<K>>;
// A 204 is generated as `content: never`: no body.
type JsonOf<R> = R extends { content: infer C }
  ? [C] extends [never]
    ? undefined
    : C extends { "application/json": infer B }
      ? B
      : undefined
  : undefined;

/** An operation's answer on success (undefined for a 204). */
export type ResponseData<K extends OperationId> = JsonOf<Responses<K>[SuccessStatus<K>]>;
/** The bodies an operation may answer with on failure. */
export type ErrorBody<K extends OperationId> = JsonOf<Responses<K>[ErrorStatus<K>]>;
/** The codes an operation may fail with; `HTTP_<status>` when the answer carries no code. */
export type ErrorCode<K extends OperationId> =
  | (ErrorBody<K> extends infer B ? (B extends { code: infer C extends string } ? C : never) : never)
  | `HTTP_${number}`;

/** A call's outcome: the data, or the error as a value; `response` for the status and headers. */
export type Result<K extends OperationId> =
  | { data: ResponseData<K>; error: undefined; response: Response }
  | { data: undefined; error: MailcoreError<ErrorBody<K>, ErrorCode<K>>; response: Response };

/** A failed call: the HTTP status, the error's code, Retry-After in seconds when given, the body. */
export class MailcoreError<B = unknown, C extends string = string> extends Error {
  override readonly name = "MailcoreError";
  constructor(
    readonly status: number,
    readonly code: C,
    readonly retryAfter: number | undefined,
    readonly body: B,
  ) {
    const message = (body as { message?: unknown } | undefined)?.message;
    super(`${status} ${code}${typeof message === "string" ? `: ${message}` : ""}`);
  }
}

export interface ClientOptions {
  /** Where the API answers, e.g. "https://mail.example.com". */
  baseUrl: string;
  /** An API token (`mc_...`), sent as `Authorization: Bearer`. */
  token?: string;
  /** Attempts per call, the first included, when the API answers 429 or 503 (default 3). */
  maxAttempts?: number;
  /** A 429 or 503 whose Retry-After is longer than this is returned, not waited for (default 60). */
  maxRetryAfterSeconds?: number;
  /** The fetch to use (default the global one). */
  fetch?: typeof fetch;
}

/** A 503 without Retry-After is retried after this many seconds. */
const DEFAULT_RETRY_SECONDS = 1;

/** Retry-After in whole seconds, when the answer gives it as such. */
function retryAfterOf(response: Response): number | undefined {
  const value = response.headers.get("Retry-After");
  return value !== null && /^\d+$/.test(value.trim()) ? Number(value) : undefined;
}

function urlOf(baseUrl: string, template: string, input: Record<string, Record<string, unknown> | undefined>): string {
  const path = template.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(String(input.path?.[name])));
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(input.query ?? {}))
    if (value !== undefined) query.append(name, String(value));
  const search = query.size ? `?${query}` : "";
  return `${baseUrl.replace(/\/+$/, "")}${path}${search}`;
}

export class MailcoreClient {
  private readonly maxAttempts: number;
  private readonly maxRetryAfterSeconds: number;
  private readonly fetch: typeof fetch;

  constructor(private readonly options: ClientOptions) {
    this.maxAttempts = Math.max(1, options.maxAttempts ?? 3);
    this.maxRetryAfterSeconds = options.maxRetryAfterSeconds ?? 60;
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  /**
   * Calls one operation. A 429 or 503 is retried after its Retry-After, the same request again
   * (a send keeps its Idempotency-Key, so a retry never queues a message twice), up to
   * maxAttempts; any other answer is returned as it is.
   */
  async call<K extends OperationId>(
    operation: K,
    ...[input]: Empty extends RequestInput<K> ? [input?: RequestInput<K>] : [input: RequestInput<K>]
  ): Promise<Result<K>> {
    const { method, path, idempotencyKey } = OPERATIONS[operation];
    const given = (input ?? {}) as Record<string, Record<string, unknown> | undefined> & { body?: unknown };
    const headers = new Headers({ Accept: "application/json" });
    if (this.options.token) headers.set("Authorization", `Bearer ${this.options.token}`);
    for (const [name, value] of Object.entries(given.header ?? {}))
      if (value !== undefined) headers.set(name, String(value));
    if (idempotencyKey && !headers.has("Idempotency-Key")) headers.set("Idempotency-Key", crypto.randomUUID());
    const body = given.body === undefined ? undefined : JSON.stringify(given.body);
    if (body !== undefined) headers.set("Content-Type", "application/json");
    const url = urlOf(this.options.baseUrl, path, given);

    let response = await this.fetch(url, { method, headers, body });
    for (
      let attempt = 1;
      attempt < this.maxAttempts && (response.status === 429 || response.status === 503);
      attempt++
    ) {
      const wait = retryAfterOf(response) ?? DEFAULT_RETRY_SECONDS;
      if (wait > this.maxRetryAfterSeconds) break;
      await response.body?.cancel();
      await new Promise((resolve) => setTimeout(resolve, wait * 1000));
      response = await this.fetch(url, { method, headers, body });
    }

    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // Not JSON (a proxy's error page): the text is the body.
    }
    if (response.ok) return { data: parsed as ResponseData<K>, error: undefined, response };
    const code = (parsed as { code?: unknown } | undefined)?.code;
    return {
      data: undefined,
      error: new MailcoreError<ErrorBody<K>, ErrorCode<K>>(
        response.status,
        (typeof code === "string" ? code : `HTTP_${response.status}`) as ErrorCode<K>,
        retryAfterOf(response),
        parsed as ErrorBody<K>,
      ),
      response,
    };
  }
}
