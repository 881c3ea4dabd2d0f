// A pool of worker threads that runs CPU-bound work off the event loop, each job under a
// time cap. A job that runs past its cap has its thread terminated and replaced, so no input
// can hold a thread (or the event loop) for longer than the cap. Waiting jobs are served
// round-robin over their keys (the organization), so one sender's flood of slow jobs delays
// another sender's job by at most one job per busy sender.

/** The job ran past the pool's time cap; its thread was replaced. */
export class JobTimeout extends Error {
  constructor(readonly timeoutMs: number) {
    super(`the job ran longer than ${timeoutMs} ms`);
  }
}

interface Job<In, Out> {
  input: In;
  resolve(out: Out): void;
  reject(err: Error): void;
}

type Reply<Out> = { id: number; ok: true; output: Out } | { id: number; ok: false; error: string };

interface Slot<In, Out> {
  worker: Worker;
  job?: Job<In, Out> & { key: string; id: number; timer: ReturnType<typeof setTimeout> };
}

export interface PoolOptions {
  /** The worker's module; it calls serveJobs. */
  script: string;
  size: number;
  timeoutMs: number;
}

export class WorkerPool<In, Out> {
  private readonly slots: Slot<In, Out>[] = [];
  /** Waiting jobs per key, the keys in their round-robin order. */
  private readonly waiting = new Map<string, Job<In, Out>[]>();
  /** Jobs on a thread, and the id of the job last handed out, per key with work in the pool. */
  private readonly running = new Map<string, number>();
  private readonly served = new Map<string, number>();
  private nextId = 1;
  private closed = false;

  constructor(private readonly o: PoolOptions) {
    for (let i = 0; i < o.size; i++) this.slots.push({ worker: this.spawn() });
  }

  run(key: string, input: In): Promise<Out> {
    if (this.closed) return Promise.reject(new Error("the worker pool is closed"));
    return new Promise<Out>((resolve, reject) => {
      const queue = this.waiting.get(key);
      if (queue) queue.push({ input, resolve, reject });
      else this.waiting.set(key, [{ input, resolve, reject }]);
      this.dispatch();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const queue of this.waiting.values())
      for (const job of queue) job.reject(new Error("the worker pool is closed"));
    this.waiting.clear();
    this.served.clear();
    for (const slot of this.slots) {
      this.finish(slot)?.reject(new Error("the worker pool is closed"));
      slot.worker.terminate();
    }
  }

  private spawn(): Worker {
    const worker = new Worker(this.o.script);
    worker.unref();
    worker.addEventListener("message", (e: MessageEvent<Reply<Out>>) => this.settle(worker, e.data));
    worker.addEventListener("error", (e: ErrorEvent) => this.fail(worker, new Error(`worker error: ${e.message}`)));
    return worker;
  }

  /**
   * Hands waiting jobs to idle threads: next is the waiting key served longest ago (a key with
   * nothing running or waiting is forgotten, and so comes first when it returns).
   */
  private dispatch(): void {
    for (const slot of this.slots) {
      if (slot.job || this.waiting.size === 0) continue;
      let next: [string, Job<In, Out>[]] | undefined;
      for (const entry of this.waiting) {
        if (next === undefined || this.servedAt(entry[0]) < this.servedAt(next[0])) next = entry;
      }
      const [key, queue] = next!;
      const job = queue.shift()!;
      this.waiting.delete(key);
      if (queue.length > 0) this.waiting.set(key, queue);
      this.running.set(key, this.runningOf(key) + 1);
      const id = this.nextId++;
      this.served.set(key, id);
      const timer = setTimeout(() => this.fail(slot.worker, new JobTimeout(this.o.timeoutMs)), this.o.timeoutMs);
      slot.job = { ...job, key, id, timer };
      slot.worker.postMessage({ id, input: job.input });
    }
  }

  private servedAt(key: string): number {
    return this.served.get(key) ?? 0;
  }

  private runningOf(key: string): number {
    return this.running.get(key) ?? 0;
  }

  /** Takes the job off its thread. */
  private finish(slot: Slot<In, Out>): Job<In, Out> | undefined {
    const job = slot.job;
    if (!job) return undefined;
    clearTimeout(job.timer);
    slot.job = undefined;
    const left = this.runningOf(job.key) - 1;
    if (left > 0) this.running.set(job.key, left);
    else this.running.delete(job.key);
    if (left === 0 && !this.waiting.has(job.key)) this.served.delete(job.key);
    return job;
  }

  private settle(worker: Worker, reply: Reply<Out>): void {
    const slot = this.slots.find((s) => s.worker === worker);
    if (!slot?.job || slot.job.id !== reply.id) return;
    const job = this.finish(slot)!;
    if (reply.ok) job.resolve(reply.output);
    else job.reject(new Error(reply.error));
    this.dispatch();
  }

  /** The thread timed out or died: its job fails and a fresh thread takes its place. */
  private fail(worker: Worker, err: Error): void {
    const slot = this.slots.find((s) => s.worker === worker);
    if (!slot) return;
    worker.terminate();
    this.finish(slot)?.reject(err);
    if (this.closed) return;
    slot.worker = this.spawn();
    this.dispatch();
  }
}

/** The worker side: answers each job with fn's result, or its error's message. */
export function serveJobs<In, Out>(fn: (input: In) => Out): void {
  const thread = globalThis as unknown as {
    onmessage: (e: MessageEvent<{ id: number; input: In }>) => void;
    postMessage(reply: Reply<Out>): void;
  };
  thread.onmessage = (e) => {
    const { id, input } = e.data;
    let reply: Reply<Out>;
    try {
      reply = { id, ok: true, output: fn(input) };
    } catch (err) {
      reply = { id, ok: false, error: (err as Error).message };
    }
    thread.postMessage(reply);
  };
}
