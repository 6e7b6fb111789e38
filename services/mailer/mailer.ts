// The mailer's loop: claim due emails, deliver them side by side, claim again; poll while idle. Stopping lets the
// attempts in flight finish (their outcome is recorded) and claims nothing more.
import { config } from '../../shared/config'
import { describeError, log } from '../../shared/log'
import { deliver } from './deliver'
import { claimDue } from './queue'

export interface Mailer {
  stop(): Promise<void>
}

export function startMailer(): Mailer {
  let running = true
  let wake: (() => void) | undefined
  const loop = (async () => {
    while (running) {
      let claimed = 0
      try {
        const batch = await claimDue(config.mail.batchSize, config.mail.leaseMs)
        claimed = batch.length
        await Promise.all(batch.map((email) => deliver(email).catch((error) => {
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
    async stop() {
      running = false
      wake?.()
      await loop
    },
  }
}
