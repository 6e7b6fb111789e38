// The mailer's loop: claim due emails, deliver them side by side, claim again; poll while idle. Stopping claims
// nothing more (a claim already on its way when stop() is called is given back, never delivered) and waits for the
// attempts in flight, up to MAILER_SMTP_TIMEOUT_MS: their outcome is recorded. An attempt it stops waiting for is not
// cancelled: it records its outcome if it ends while the database is still reachable (`sent` only with the server's
// acceptance), else nothing, and its email stays leased until the lease runs out, then is tried again with the same
// Message-ID.
import { config } from '../../shared/config'
import { describeError, log } from '../../shared/log'
import { deliver } from './deliver'
import { claimDue, releaseClaims } from './queue'
import type { MailTransport } from './transport'

export interface Mailer {
  /** Stops claiming and waits for the attempts in flight, at most `waitMs` (default MAILER_SMTP_TIMEOUT_MS). */
  stop(waitMs?: number): Promise<void>
}

/** Starts the loop, delivering over `transport` (the caller closes it once the mailer has stopped). */
export function startMailer(transport: MailTransport): Mailer {
  let running = true
  let wake: (() => void) | undefined
  const loop = (async () => {
    while (running) {
      let claimed = 0
      try {
        const batch = await claimDue(config.mail.batchSize, config.mail.leaseMs)
        if (!running) {
          // Stopped while the claim was on its way: a stopped mailer starts no delivery. The batch is given back now
          // rather than left leased until its lease runs out.
          await releaseClaims(batch).catch((error) => log('warn', 'mail claims not released; their leases will run out', describeError(error)))
          break
        }
        claimed = batch.length
        await Promise.all(batch.map((email) => deliver(email, transport).catch((error) => {
          // The outcome could not be recorded (the database went away): the lease runs out and the email is tried again.
          log('warn', 'mail delivery not recorded; it will be retried when its lease ends', { emailId: email.id, ...describeError(error) })
        })))
      } catch (error) {
        log('warn', 'mail queue unavailable; retrying', describeError(error))
      }
      if (claimed < config.mail.batchSize && running) {
        await new Promise<void>((resolve) => {
          wake = resolve
          setTimeout(resolve, config.mail.pollMs)
        })
        wake = undefined
      }
    }
  })()
  log('info', 'mailer started', { smtp: new URL(config.mail.smtpUrl).host, batch: config.mail.batchSize, leaseMs: config.mail.leaseMs })
  return {
    async stop(waitMs = config.mail.smtpTimeoutMs) {
      running = false
      wake?.()
      let timer: ReturnType<typeof setTimeout> | undefined
      const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), waitMs)))
      const ended = await Promise.race([loop.then(() => 'done' as const), late])
      clearTimeout(timer)
      if (ended === 'late') log('warn', 'mailer stopped waiting for attempts in flight; one that ends before the process exits records its outcome, else its email stays leased and is retried with the same Message-ID', { waitedMs: waitMs })
    },
  }
}
