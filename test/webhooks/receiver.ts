// A webhook receiver on loopback for the delivery tests: every request kept with its headers and body, and what it
// answers chosen by a behaviour per path. Signatures are checked by the tests with the `standardwebhooks` library.
import { Webhook } from 'standardwebhooks'

export interface Received {
  path: string
  headers: Record<string, string>
  body: string
  at: number
}

/** What the receiver does for one path: an answer, or a promise of one (held as long as the test wants). */
export type Behaviour = (request: Received, nth: number) => Response | Promise<Response>

export interface Receiver {
  url(path: string): string
  /** Requests received on `path`, in order. */
  received(path: string): Received[]
  on(path: string, behaviour: Behaviour): void
  stop(): void
}

export function startReceiver(): Receiver {
  const seen: Received[] = []
  const behaviours = new Map<string, Behaviour>()
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    idleTimeout: 30,
    async fetch(request) {
      const path = new URL(request.url).pathname
      const received = { path, headers: Object.fromEntries(request.headers), body: await request.text(), at: Date.now() }
      seen.push(received)
      const behaviour = behaviours.get(path)
      if (!behaviour) return new Response('ok')
      return behaviour(received, seen.filter((r) => r.path === path).length)
    },
  })
  return {
    url: (path) => `http://127.0.0.1:${server.port}${path}`,
    received: (path) => seen.filter((r) => r.path === path),
    on: (path, behaviour) => void behaviours.set(path, behaviour),
    stop: () => server.stop(true),
  }
}

/** The payload, once the `standardwebhooks` library has verified its signature under `secret` (throws otherwise). */
export const verified = (secret: string, request: Received) => new Webhook(secret).verify(request.body, request.headers) as any
