import { expect, test } from "bun:test";
import { captureLogger } from "../testkit/logcapture";
import { FailureEpisode } from "./episodes";

test("an episode: one line when it starts, a summary every 10 s, one line when it ends", () => {
  const { log, lines } = captureLogger();
  let now = 0;
  const episode = new FailureEpisode(log, "lane release", { lane: 1 }, () => now);
  episode.succeeded(); // nothing to end
  for (; now < 25_000; now += 25) episode.failed(new Error("Connection is closed."));
  episode.succeeded();
  episode.succeeded();
  expect(lines.map((l) => [l.level, l.msg])).toEqual([
    ["warn", "lane release failing"],
    ["warn", "lane release still failing"],
    ["warn", "lane release still failing"],
    ["info", "lane release recovered"],
  ]);
  expect(lines[1]!.fields).toEqual({ lane: 1, error: "Connection is closed.", failures: 401, downMs: 10_000 });
  expect(lines[3]!.fields).toEqual({ lane: 1, failures: 1_000, downMs: 25_000 });
});
