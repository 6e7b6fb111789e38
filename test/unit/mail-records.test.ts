// What a domain check makes of the TXT answers it got (pure): a long record split into strings or into separate
// records still verifies, and an answer built to be expensive (thousands of records) is judged quickly, not quadratically.
import { expect, test } from 'bun:test'
import { checkRecords, type Domain } from '../../shared/mail/domains'

const dkimValue = `v=DKIM1; k=rsa; p=${'A'.repeat(392)}`
const ownershipValue = 'platform-verification=0123456789abcdef'
const domain = {
  records: [
    { record: 'DKIM', value: dkimValue },
    { record: 'SPF', value: 'v=spf1 include:spf.mail.localhost ~all' },
    { record: 'Ownership', value: ownershipValue },
  ],
} as unknown as Domain

test('a DKIM record handed back as separate 255-byte records, among others, is found; whitespace and case do not matter', () => {
  const split = [dkimValue.slice(0, 255), dkimValue.slice(255)]
  const result = checkRecords(domain, {
    dkim: ['unrelated', ...split, 'another'],
    spf: ['v=spf1 include:_spf.example.net', ' include:spf.mail.localhost ~all'],
    ownership: [ownershipValue.toUpperCase()],
  })
  expect(result).toEqual({ dkim: 'verified', spf: 'verified', ownership: 'verified' })
})

test('twenty thousand tiny records (an answer a hostile owner controls) are judged, as not found, without quadratic work', () => {
  const flood = Array.from({ length: 20_000 }, (_, i) => String(i % 10))
  expect(checkRecords(domain, { dkim: flood, spf: flood, ownership: flood })).toEqual({ dkim: 'failed', spf: 'failed', ownership: 'failed' })
})

test('only the first fifty records are looked at', () => {
  const noise = Array.from({ length: 50 }, (_, i) => `noise ${i}`)
  expect(checkRecords(domain, { dkim: [...noise, dkimValue], spf: [], ownership: [ownershipValue] }).dkim).toBe('failed')
})
