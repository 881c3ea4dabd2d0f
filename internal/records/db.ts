import { SQL } from "bun";
import { mkdirSync } from "node:fs";
import { dirname } from "node:path";

// The SQL connection the records live behind: Bun's built-in SQL client, which speaks both
// SQLite and PostgreSQL with one tagged-template API, so the records use the same SQL text on
// both where the dialects agree.

export type Dialect = "sqlite" | "postgres";

/** A query function: the client, or a transaction's scoped client. */
export type Sql = SQL;

export class Db {
  /** On SQLite, the tail of the queue of operations (see run). */
  private tail: Promise<unknown> = Promise.resolve();

  private constructor(
    readonly dialect: Dialect,
    private readonly sql: SQL,
    /** Where the records are, without credentials: for log lines. */
    readonly where: string,
  ) {}

  /** PostgreSQL when url is set (postgres:// or postgresql://), otherwise the SQLite file. */
  static async open(o: { url?: string; sqliteFile: string; poolSize?: number; connectTimeoutS?: number }): Promise<Db> {
    if (o.url) {
      const sql = new SQL({
        url: o.url,
        max: o.poolSize ?? 10,
        connectionTimeout: o.connectTimeoutS ?? 5,
        idleTimeout: 60,
      });
      const u = new URL(o.url);
      const db = new Db("postgres", sql, `postgresql://${u.hostname}:${u.port || 5432}${u.pathname}`);
      await db.run((q) => q`SELECT 1`);
      return db;
    }
    if (o.sqliteFile !== ":memory:") mkdirSync(dirname(o.sqliteFile), { recursive: true });
    const sql = new SQL({ adapter: "sqlite", filename: o.sqliteFile, create: true });
    const db = new Db("sqlite", sql, o.sqliteFile);
    await db.run(async (q) => {
      // The wait first: switching to WAL needs the lock another process may hold (a migration).
      await q`PRAGMA busy_timeout = 5000`;
      await q`PRAGMA journal_mode = WAL`;
      await q`PRAGMA synchronous = NORMAL`;
      await q`PRAGMA foreign_keys = ON`;
    });
    return db;
  }

  /**
   * Runs one operation. Bun's SQLite adapter has a single connection, and a statement issued
   * while a transaction is open on it joins that transaction (and its rollback), so on SQLite
   * operations run one at a time, in order. PostgreSQL runs them on its pool.
   */
  run<T>(op: (sql: Sql) => Promise<T>): Promise<T> {
    if (this.dialect === "postgres") return op(this.sql);
    const result = this.tail.then(() => op(this.sql));
    this.tail = result.catch(() => {});
    return result;
  }

  /** Runs op in one transaction. */
  tx<T>(op: (sql: Sql) => Promise<T>): Promise<T> {
    return this.run((sql) => sql.begin((tx) => op(tx as unknown as Sql)) as Promise<T>);
  }

  /**
   * Runs op while holding the database-wide lock named by key: PostgreSQL's session advisory
   * lock on a connection of its own; on SQLite, a write transaction (BEGIN IMMEDIATE).
   */
  async exclusive<T>(key: number, op: (sql: Sql) => Promise<T>): Promise<T> {
    if (this.dialect === "sqlite")
      return this.run((sql) => sql.begin("IMMEDIATE", (tx) => op(tx as unknown as Sql)) as Promise<T>);
    const conn = await this.sql.reserve();
    try {
      await conn`SELECT pg_advisory_lock(${key})`;
      try {
        return await op(conn as unknown as Sql);
      } finally {
        await conn`SELECT pg_advisory_unlock(${key})`;
      }
    } finally {
      conn.release();
    }
  }

  async close(): Promise<void> {
    await this.tail.catch(() => {});
    await this.sql.close();
  }
}

/** Whether err is a unique-key violation, in either dialect. */
/** A record that is not there, or already is: the daemon answers NotFound or AlreadyExists. */
export type RecordErrorKind = "not_found" | "already_exists";

export class RecordError extends Error {
  constructor(
    readonly kind: RecordErrorKind,
    message: string,
  ) {
    super(message);
  }
}

export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; errno?: string | number };
  return (
    e?.errno === "23505" ||
    (typeof e?.code === "string" &&
      e.code.startsWith("SQLITE_CONSTRAINT_") &&
      e.code !== "SQLITE_CONSTRAINT_FOREIGNKEY")
  );
}

/** PostgreSQL returns 64-bit integers (and counts) as strings; SQLite as numbers. */
export function num(v: unknown): number {
  return typeof v === "number" ? v : Number(v);
}

export function numOrNull(v: unknown): number | null {
  return v === null || v === undefined ? null : num(v);
}

/** Rows per INSERT, well under both dialects' limits on bound parameters. */
const CHUNK = 500;

/** items in runs of at most size (a multi-row INSERT each). */
export function chunks<T>(items: T[], size = CHUNK): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
