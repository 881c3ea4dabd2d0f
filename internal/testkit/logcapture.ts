// A Logger that keeps its lines, for tests that check what a component logs and how often.
import type { Fields, Logger } from "../log/log";

export interface CapturedLine {
  level: "info" | "warn" | "error";
  msg: string;
  fields: Fields;
}

export function captureLogger(): { log: Logger; lines: CapturedLine[] } {
  const lines: CapturedLine[] = [];
  const at =
    (level: CapturedLine["level"]) =>
    (msg: string, fields: Fields = {}) =>
      void lines.push({ level, msg, fields });
  const log: Logger = { info: at("info"), warn: at("warn"), error: at("error") };
  return { log, lines };
}
