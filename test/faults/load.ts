// Steady concurrent load across a fault: N clients each send one request after another until stopped, and every
// outcome is recorded with when it was sent and how long its answer took.

export interface Outcome {
  /** ms since the load started, when the request was sent. */
  sentAt: number
  /** ms until the answer (or the failure). */
  ms: number
  /** HTTP status; 0 when no answer came (connection dropped, reset, or the client's own time-out). */
  status: number
  retryAfter: string | null
  /** Why there was no answer, when status is 0. */
  failure?: string
}

export interface Load {
  /** Stops sending and resolves with every outcome once the requests in flight have answered. */
  stop(): Promise<Outcome[]>
  /** ms since the load started. */
  elapsed(): number
}

/** `request` must resolve to a Response; the client gives up on one after `giveUpMs` (then status 0). */
export function startLoad(concurrency: number, request: (signal: AbortSignal) => Promise<Response>, giveUpMs = 15_000): Load {
  const started = performance.now()
  const elapsed = () => performance.now() - started
  const outcomes: Outcome[] = []
  let running = true
  const client = async () => {
    while (running) {
      const sentAt = elapsed()
      try {
        const response = await request(AbortSignal.timeout(giveUpMs))
        await response.arrayBuffer()
        outcomes.push({ sentAt, ms: elapsed() - sentAt, status: response.status, retryAfter: response.headers.get('retry-after') })
      } catch (error) {
        outcomes.push({ sentAt, ms: elapsed() - sentAt, status: 0, retryAfter: null, failure: String(error) })
      }
      await Bun.sleep(5) // a steady stream, not a busy loop that starves the workers of the 2 cores
    }
  }
  const clients = Array.from({ length: concurrency }, client)
  return {
    elapsed,
    async stop() {
      running = false
      await Promise.all(clients)
      return outcomes.sort((a, b) => a.sentAt - b.sentAt)
    },
  }
}

/** The first success sent at or after `from` ms: when the service was serving again. */
export const firstSuccessAfter = (outcomes: Outcome[], from: number) =>
  outcomes.find((o) => o.sentAt >= from && o.status === 200)
