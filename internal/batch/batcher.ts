// A micro-batcher: calls submitted while the event loop is busy with one turn are sent as
// one batch when that turn ends (setImmediate), at most `maxBatch` at a time. Under load a
// turn holds many requests, so one RPC carries many admissions; when idle, a call waits
// for no timer at all.

interface Pending<I, O> {
  item: I;
  resolve: (o: O) => void;
  reject: (e: unknown) => void;
}

export class MicroBatcher<I, O> {
  private pending: Pending<I, O>[] = [];
  private scheduled = false;

  constructor(
    private readonly send: (items: I[]) => Promise<O[]>,
    private readonly maxBatch: number,
  ) {}

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.pending.push({ item, resolve, reject });
      if (this.pending.length >= this.maxBatch) this.flush();
      else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.pending.splice(0, this.maxBatch);
    if (batch.length === 0) return;
    if (this.pending.length > 0 && !this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
    this.send(batch.map((p) => p.item)).then(
      (out) => {
        if (out.length !== batch.length) {
          const err = new Error(`batch of ${batch.length} answered with ${out.length}`);
          for (const p of batch) p.reject(err);
          return;
        }
        batch.forEach((p, i) => p.resolve(out[i]!));
      },
      (err) => {
        for (const p of batch) p.reject(err);
      },
    );
  }
}
