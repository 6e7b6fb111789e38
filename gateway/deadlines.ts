// Many deadlines on one timer: a connection's connect timeout and its token's expiry cost an entry in a Set, not a
// timer object each (at 10 000 idle connections a timer each is a measurable share of the gateway's memory).
// Deadlines fire on the next tick at or after them (TICK_MS resolution), in no particular order within a tick.
const TICK_MS = 100

/** A deadline's slot: the first tick boundary at or after it. */
const slotOf = (atMs: number) => Math.ceil(atMs / TICK_MS)
/** The last slot whose boundary `now` has reached. */
const reached = (now: number) => Math.floor(now / TICK_MS)

export class Deadlines<T> {
  private readonly slots = new Map<number, Set<T>>()
  private readonly slotOfItem = new Map<T, number>()
  private last = reached(Date.now())
  private timer: ReturnType<typeof setInterval> | undefined

  constructor(private readonly fire: (item: T) => void) {}

  /** Sets (or moves) the deadline of `item` to `atMs` (epoch ms). */
  set(item: T, atMs: number): void {
    this.clear(item)
    const slot = Math.max(slotOf(atMs), this.last + 1)
    let items = this.slots.get(slot)
    if (!items) this.slots.set(slot, (items = new Set()))
    items.add(item)
    this.slotOfItem.set(item, slot)
    this.timer ??= setInterval(() => this.tick(), TICK_MS)
  }

  clear(item: T): void {
    const slot = this.slotOfItem.get(item)
    if (slot === undefined) return
    this.slotOfItem.delete(item)
    const items = this.slots.get(slot)
    items?.delete(item)
    if (items?.size === 0) this.slots.delete(slot)
  }

  get size(): number {
    return this.slotOfItem.size
  }

  /** Fires everything due, slot by slot since the last tick (a late tick catches up). */
  tick(now = Date.now()): void {
    const due = reached(now)
    for (let slot = this.last + 1; slot <= due; slot++) {
      const items = this.slots.get(slot)
      if (!items) continue
      this.slots.delete(slot)
      for (const item of items) {
        this.slotOfItem.delete(item)
        this.fire(item)
      }
    }
    this.last = due
    if (this.slotOfItem.size === 0 && this.timer) {
      clearInterval(this.timer)
      this.timer = undefined
    }
  }
}
