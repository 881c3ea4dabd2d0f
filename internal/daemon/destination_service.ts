import { create, type MessageInitShape } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../clock/clock";
import {
  type DestinationService,
  type DestinationStateSchema,
  type ReportDestinationsRequest,
  WorkerDestinationsSchema,
} from "../gen/mailcore/limiter/v1/destinations_pb";

// The destination service (DestinationService): the workers' reports of MX delivery's
// destinations, kept in this daemon's memory for the admin CLI. State of the moment, not a
// record: a daemon that restarts knows them again within a report's interval.

/** A worker that has not reported for this long is forgotten (it stopped, or reports to another daemon). */
export const DESTINATION_REPORT_KEPT_MS = 30_000;
/** The destinations one report keeps at most (the busiest first, as the worker sends them). */
const MAX_DESTINATIONS = 1_000;

type State = MessageInitShape<typeof DestinationStateSchema>;

/** The last report of each worker. */
export class DestinationReports {
  private readonly byWorker = new Map<string, { atMs: number; destinations: State[] }>();

  constructor(private readonly clock: Clock) {}

  report(workerId: string, destinations: State[]): void {
    this.byWorker.set(workerId, { atMs: this.clock.nowMs(), destinations: destinations.slice(0, MAX_DESTINATIONS) });
  }

  /** Every worker that reported within DESTINATION_REPORT_KEPT_MS, by id. */
  list() {
    const now = this.clock.nowMs();
    for (const [id, r] of this.byWorker) if (now - r.atMs > DESTINATION_REPORT_KEPT_MS) this.byWorker.delete(id);
    return [...this.byWorker]
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([workerId, r]) =>
        create(WorkerDestinationsSchema, { workerId, reportedAtMs: BigInt(r.atMs), destinations: r.destinations }),
      );
  }
}

/** DestinationService's methods, by name. */
export function destinationHandlers(reports: DestinationReports): ServiceImpl<typeof DestinationService> {
  return {
    reportDestinations: (req: ReportDestinationsRequest) => {
      reports.report(req.workerId, req.destinations);
      return {};
    },
    listDestinations: () => ({ workers: reports.list() }),
  };
}
