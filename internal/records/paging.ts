import type { SQL } from "bun";
import type { Sql } from "./db";

// Every list of the records is newest first and walked by keyset: a page ends at its last
// row's key and the next page starts below that key, so rows added during a walk (above it)
// are never met, and none is skipped or repeated. A cursor is that key, opaque to clients.

export interface Page<T> {
  data: T[];
  /** The next page's cursor; null on the last page. */
  nextCursor: string | null;
}

/**
 * The columns a list is ordered by, newest first: `at` (a seq, or a created-at time), then `id`
 * where `at` has ties. A row's key is read from the row by the columns' names (after any "t.").
 */
export interface Order {
  at: string;
  id?: string;
}

/** A table's identity column, which numbers its rows in the order they were added. */
export const BY_SEQ: Order = { at: "seq" };

/** Rows by creation time, then id (random ids: times tie). */
export const BY_CREATED: Order = { at: "created_ms", id: "id" };

/** Where a page ends: its last row's `at`, and its id when the order has one ("" otherwise). */
interface Key {
  at: number;
  id: string;
}

/** Above every row: the first page. */
const FIRST: Key = { at: Number.MAX_SAFE_INTEGER, id: "" };
/** Below every row (seqs and times are never negative): a cursor that is none reads an empty page. */
const NONE: Key = { at: -1, id: "" };

function encodeCursor(key: Key): string {
  return Buffer.from(`${key.at}.${key.id}`).toString("base64url");
}

function decodeCursor(cursor: string): Key | undefined {
  const m = /^(\d{1,16})\.(\w{0,64})$/.exec(Buffer.from(cursor, "base64url").toString());
  return m ? { at: Number(m[1]), id: m[2]! } : undefined;
}

/** Whether cursor is one a page handed out (the services answer any other as invalid). */
export function isCursor(cursor: string): boolean {
  return decodeCursor(cursor) !== undefined;
}

const column = (name: string) => name.slice(name.lastIndexOf(".") + 1);

/**
 * One page of a newest-first list: the rows `select` reads (a query fragment ending in a WHERE
 * condition, which this extends) that come after cursor's key, at most limit. An empty or
 * missing cursor reads the first page; one that is not a cursor, none. `below` bounds `at`
 * (at < below) as part of the key the walk starts from: PostgreSQL starts an index scan from
 * one bound per column, so a separate `at < below` beside the key would be a filter.
 */
export async function newestFirst<R extends object>(
  sql: Sql,
  select: SQL.Query<unknown>,
  order: Order,
  o: { limit: number; cursor?: string; below?: number },
): Promise<Page<R>> {
  let after = o.cursor ? (decodeCursor(o.cursor) ?? NONE) : FIRST;
  if (o.below !== undefined && o.below <= after.at) after = { at: o.below, id: "" };
  const at = sql(order.at);
  const rows = (
    order.id === undefined
      ? await sql`${select} AND ${at} < ${after.at} ORDER BY ${at} DESC LIMIT ${o.limit + 1}`
      : // A row value, not an OR of the two: both databases walk an (at, id) index from the key with it.
        await sql`${select} AND (${at}, ${sql(order.id)}) < (${after.at}, ${after.id})
          ORDER BY ${at} DESC, ${sql(order.id)} DESC LIMIT ${o.limit + 1}`
  ) as R[];
  const page = rows.slice(0, o.limit);
  const last = page.at(-1) as Record<string, unknown> | undefined;
  const key = (r: Record<string, unknown>): Key => ({
    at: Number(r[column(order.at)]),
    id: order.id === undefined ? "" : String(r[column(order.id)]),
  });
  return {
    data: page,
    nextCursor: rows.length > o.limit && last ? encodeCursor(key(last)) : null,
  };
}

/** page with each row mapped by f. */
export function mapPage<R, T>(page: Page<R>, f: (row: R) => T): Page<T> {
  return { data: page.data.map(f), nextCursor: page.nextCursor };
}
