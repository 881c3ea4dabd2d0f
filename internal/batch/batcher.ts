// A micro-batcher: calls submitted while the event loop is busy with one turn are sent as
// one batch when that turn ends (setImmediate), at most `maxBatch` per batch and at most
// `maxInFlight` batches under way. While every slot is busy, calls wait and join the next
// batch, so under load a batch grows to what arrives during one round trip (no timer, no
// added latency when idle), and the daemon sees few large calls instead of many small ones.

interface Pending<I, O> {
  item: I;
  resolve: (o: O) => void;
  reject: (e: unknown) => void;
}

export class MicroBatcher<I, O> {
  private pending: Pending<I, O>[] = [];
  private scheduled = false;
  private inFlight = 0;

  constructor(
    private readonly send: (items: I[]) => Promise<O[]>,
    private readonly maxBatch: number,
    private readonly maxInFlight = 2,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.pending.length === 0 || this.inFlight >= this.maxInFlight) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  private flush(): void {
    while (this.pending.length > 0 && this.inFlight < this.maxInFlight) {
      const batch = this.pending.splice(0, this.maxBatch);
      this.inFlight++;
      this.send(batch.map((p) => p.item))
        .then((out) => {
          if (out.length !== batch.length) throw new Error(`batch of ${batch.length} answered with ${out.length}`);
          for (const [i, p] of batch.entries()) p.resolve(out[i]!);
        })
        .catch((err) => {
          for (const p of batch) p.reject(err);
        })
        .finally(() => {
          this.inFlight--;
          this.schedule();
        });
    }
  }
}
