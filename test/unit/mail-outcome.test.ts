// What an SMTP answer means for an email: temporary (retried), permanent (bounced, suppressing only addresses refused
// at RCPT), or a failure that is neither; and the backoff between attempts.
import { expect, test } from 'bun:test'
import { classifyAccepted, classifyFailure, retryDelayMs } from '../../services/mailer/outcome'

const refused = (...codes: number[]) => ({
  code: 'EENVELOPE', response: 'refused', rejectedErrors: codes.map((responseCode, i) => ({ recipient: `r${i}@example.org`, responseCode })),
})

test('every recipient refused: permanent only when every refusal is 5xx (those addresses are suppressed), else temporary', () => {
  expect(classifyFailure(refused(550, 551))).toEqual({ kind: 'bounced', reason: 'refused', suppress: ['r0@example.org', 'r1@example.org'] })
  expect(classifyFailure(refused(550, 451)).kind).toBe('temporary')
})

test('a reply code at DATA: 5xx bounces without suppressing anyone (the content was refused), 4xx is temporary', () => {
  expect(classifyFailure({ code: 'EMESSAGE', command: 'DATA', responseCode: 554, response: '554 spam' })).toEqual({ kind: 'bounced', reason: '554 spam', suppress: [] })
  expect(classifyFailure({ code: 'EENVELOPE', command: 'MAIL FROM', responseCode: 553, response: '553 sender refused' }).kind).toBe('bounced')
  expect(classifyFailure({ code: 'EMESSAGE', command: 'DATA', responseCode: 452, response: '452 full' }).kind).toBe('temporary')
})

test('a 5xx about the link to the relay (its login, TLS, greeting) is temporary: the message was never judged, nobody bounces', () => {
  expect(classifyFailure({ code: 'EAUTH', command: 'AUTH PLAIN', responseCode: 535, response: '535 5.7.8 bad credentials' }).kind).toBe('temporary')
  expect(classifyFailure({ code: 'EAUTH', command: 'AUTH PLAIN', responseCode: 530, response: '530 auth required' }).kind).toBe('temporary')
  expect(classifyFailure({ code: 'ETLS', command: 'STARTTLS', responseCode: 554, response: '554 no TLS' }).kind).toBe('temporary')
  expect(classifyFailure({ code: 'EPROTOCOL', command: 'EHLO', responseCode: 554, response: '554 go away' }).kind).toBe('temporary')
  expect(classifyFailure({ responseCode: 502, response: '502 unknown command' }).kind).toBe('temporary') // not said to which command
})

test('no usable connection is temporary; anything else is a failure', () => {
  for (const code of ['ECONNREFUSED', 'ETIMEDOUT', 'ECONNECTION', 'ESOCKET']) expect(classifyFailure({ code, message: 'x' }).kind).toBe('temporary')
  expect(classifyFailure({ code: 'EMESSAGE', message: 'bad' }).kind).toBe('failed')
})

test('accepted for some recipients: delivered, listing the others', () => {
  expect(classifyAccepted({ rejectedErrors: [{ recipient: 'x@example.org', responseCode: 550 }] })).toEqual({ kind: 'delivered', refused: [{ address: 'x@example.org', code: 550 }] })
  expect(classifyAccepted({})).toEqual({ kind: 'delivered', refused: [] })
})

test('backoff doubles from the base after each temporary failure, up to the cap', () => {
  expect([1, 2, 3, 4, 5].map((n) => retryDelayMs(n, 30_000, 100_000))).toEqual([30_000, 60_000, 100_000, 100_000, 100_000])
})
