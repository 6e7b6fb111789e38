// Counted slots per key on this worker (analytics queries per product, per organization, per worker): a task runs
// holding one slot, and with every slot of its key taken it is refused at once rather than queued.
export class Slots {
  private readonly taken = new Map<string, number>()

  /** Slots of `key` taken now. */
  running(key: string): number {
    return this.taken.get(key) ?? 0
  }

  /**
   * Runs `task` holding one of `key`'s `limit` slots, released however the task ends. With all taken, throws what
   * `refuse(running)` makes, without running the task.
   */
  async run<T>(key: string, limit: number, refuse: (running: number) => Error, task: () => Promise<T>): Promise<T> {
    const running = this.running(key)
    if (running >= limit) throw refuse(running)
    this.taken.set(key, running + 1)
    try {
      return await task()
    } finally {
      const left = this.running(key) - 1
      if (left > 0) this.taken.set(key, left)
      else this.taken.delete(key)
    }
  }
}
