import { expect, test } from "bun:test";
import { replication } from "./confirm";

const info = (...replicas: string[]) =>
  [
    "# Replication",
    "role:master",
    `connected_slaves:${replicas.length}`,
    ...replicas.map((r, i) => `slave${i}:ip=127.0.0.1,port=${7001 + i},${r}`),
    "master_failover_state:no-failover",
    "master_replid:3f1c9a0e5b7d2c4a6e8f0b1d3c5e7a9b1d3f5e7a",
    "master_repl_offset:1200",
  ].join("\r\n");

test("only replicas online count: one in its first full sync confirms nothing yet", () => {
  expect(replication(info())).toEqual({ replid: "3f1c9a0e5b7d2c4a6e8f0b1d3c5e7a9b1d3f5e7a", online: 0 });
  expect(replication(info("state=wait_bgsave,offset=0,lag=0")).online).toBe(0);
  expect(replication(info("state=send_bulk,offset=0,lag=0")).online).toBe(0);
  expect(replication(info("state=online,offset=1200,lag=0")).online).toBe(1);
  expect(replication(info("state=online,offset=1200,lag=0", "state=send_bulk,offset=0,lag=0")).online).toBe(1);
});
