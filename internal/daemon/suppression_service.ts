import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../clock/clock";
import {
  type AddSuppressionRequest,
  type DeleteSuppressionRequest,
  type ListSuppressionsRequest,
  type Suppression as SuppressionMessage,
  SuppressionSchema,
  type SuppressionService,
} from "../gen/mailcore/limiter/v1/suppressions_pb";
import type { Records } from "../records/records";
import { isSuppressionReason, SUPPRESSION_REASONS } from "../mail/suppression";
import type { Suppression } from "../records/suppressions";
import { guard, pageCursor } from "./rpc_errors";
import type { SendingState } from "./sending_state";
import { tenantOf } from "./tenant";

// The suppression service (SuppressionService): an organization's suppression list, for the API
// front. The daemon lists addresses itself too (bounces, complaints); an address listed here by
// the organization has the reason "manual".

const MAX_PAGE = 100;
const DEFAULT_PAGE = 20;
/**
 * An address as SMTP carries it: at most 254 characters, a local part of at most 64, @, a domain
 * with a dot. Characters, not UTF-16 units, as the API's contract counts them (an address beyond
 * the BMP must not pass the API and fail here).
 */
const ADDRESS = /^[^\s@<>]{1,64}@[^\s@<>.]+(\.[^\s@<>.]+)+$/u;
const MAX_ADDRESS = 254;

export interface SuppressionDeps {
  records: Pick<Records, "suppressions">;
  clock: Clock;
  /** The hot store's copy, which the accept step reads. */
  sending: Pick<SendingState, "listed" | "unlisted">;
}

/** SuppressionService's methods, by name. */
export function suppressionHandlers(deps: SuppressionDeps): ServiceImpl<typeof SuppressionService> {
  return {
    listSuppressions: (req, ctx) => listSuppressions(deps, tenantOf(ctx.values), req),
    addSuppression: (req, ctx) => addSuppression(deps, tenantOf(ctx.values), req),
    deleteSuppression: (req, ctx) => deleteSuppression(deps, tenantOf(ctx.values), req),
  };
}

function address(email: string): string {
  const e = email.trim();
  if ([...e].length > MAX_ADDRESS || !ADDRESS.test(e))
    throw new ConnectError(`email: ${JSON.stringify(email)} is not an email address`, Code.InvalidArgument);
  return e;
}

export async function listSuppressions(deps: SuppressionDeps, orgId: string, req: ListSuppressionsRequest) {
  if (req.limit > MAX_PAGE) throw new ConnectError(`limit must be 1 to ${MAX_PAGE}`, Code.InvalidArgument);
  const reason = req.reason === "" ? undefined : req.reason;
  if (reason !== undefined && !isSuppressionReason(reason))
    throw new ConnectError(`reason must be one of ${SUPPRESSION_REASONS.join(", ")}`, Code.InvalidArgument);
  const cursor = pageCursor(req.cursor);
  const page = await guard(() =>
    deps.records.suppressions.list(orgId, {
      reason,
      limit: req.limit || DEFAULT_PAGE,
      cursor,
    }),
  );
  return { suppressions: page.data.map(suppressionMessage), nextCursor: page.nextCursor ?? "" };
}

export async function addSuppression(deps: SuppressionDeps, orgId: string, req: AddSuppressionRequest) {
  const email = address(req.email);
  const made = await guard(async () => {
    const added = await deps.records.suppressions.add({
      orgId,
      email,
      reason: "manual",
      detail: req.detail,
      nowMs: deps.clock.nowMs(),
    });
    if (added.created) await deps.sending.listed(orgId, email, "manual");
    return added;
  });
  return { suppression: suppressionMessage(made.suppression), created: made.created };
}

export async function deleteSuppression(deps: SuppressionDeps, orgId: string, req: DeleteSuppressionRequest) {
  const email = address(req.email);
  if (!(await guard(() => deps.records.suppressions.remove(orgId, email))))
    throw new ConnectError(`${email} is not on the suppression list`, Code.NotFound);
  await guard(() => deps.sending.unlisted(orgId, email));
  return {};
}

function suppressionMessage(s: Suppression): SuppressionMessage {
  return create(SuppressionSchema, {
    email: s.email,
    reason: s.reason,
    detail: s.detail,
    messageId: s.messageId ?? "",
    createdAtMs: BigInt(s.createdMs),
  });
}
