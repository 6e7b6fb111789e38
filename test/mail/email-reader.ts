// Reading an email back through the public routes while the mailer works on it: its current state, and a wait until it
// reaches one of some events (the mailer is a separate process, so tests poll).
import { pub } from '../realtime/public-helpers'

export interface EmailReader {
  /** The email as `GET /emails/{id}` answers it. */
  read(id: string): Promise<any>
  /** Polls until the email's last event is one of `events`; fails naming where it stopped. */
  until(id: string, events: string[], ms?: number): Promise<any>
}

/** Reads emails of `productId` with the sending key `key` from the worker `worker`. */
export function emailReader(worker: () => { url: string }, productId: () => string, key: () => string, defaultMs = 15_000): EmailReader {
  const read = async (id: string) => (await pub(worker(), 'GET', `/${productId()}/mail/emails/${id}`, { key: key() })).body
  return {
    read,
    async until(id, events, ms = defaultMs) {
      for (const deadline = Date.now() + ms; Date.now() < deadline; await Bun.sleep(50)) {
        const email = await read(id)
        if (events.includes(email.last_event)) return email
      }
      throw new Error(`email ${id} never reached ${events.join('/')}: ${JSON.stringify(await read(id))}`)
    },
  }
}
