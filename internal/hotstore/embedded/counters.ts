// Counts per organization and time slot, in memory (one daemon owns the embedded store): the
// embedded side of the per-minute refusal counts and the per-second release counts.
export class SlotCounters<F extends string | number> {
  private readonly slots = new Map<string, { slot: number; counts: Map<F, number> }>();

  constructor(
    private readonly slotMs: number,
    /** Slots are kept while they are at most this many slots old. */
    private readonly keepSlots: number,
  ) {}

  slotOf(nowMs: number): number {
    return Math.floor(nowMs / this.slotMs);
  }

  add(orgId: string, field: F, n: number, nowMs: number): void {
    const slot = this.slotOf(nowMs);
    const key = `${orgId}|${slot}`;
    let entry = this.slots.get(key);
    if (!entry) {
      entry = { slot, counts: new Map() };
      this.slots.set(key, entry);
    }
    entry.counts.set(field, (entry.counts.get(field) ?? 0) + n);
  }

  get(orgId: string, slot: number, field: F): number {
    return this.slots.get(`${orgId}|${slot}`)?.counts.get(field) ?? 0;
  }

  sweep(nowMs: number): void {
    const oldest = this.slotOf(nowMs) - this.keepSlots;
    for (const [key, { slot }] of this.slots) if (slot < oldest) this.slots.delete(key);
  }
}
