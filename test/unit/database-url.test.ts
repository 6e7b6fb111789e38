// DATABASE_URL may list a failover pair: the connect time-out leaves the start-up at least the statement deadline and
// gives reaching each host but the last three quarters of it (docs/architecture.md, "PostgreSQL failover").
import { expect, test } from 'bun:test'
import { connectTimeoutSeconds, hostsIn } from '../../shared/db/client'

test('the hosts of a DATABASE_URL are counted as postgres.js reads them: credentials, database and options aside', () => {
  expect(hostsIn('postgres://postgres@127.0.0.1:55432/platform')).toBe(1)
  expect(hostsIn('postgres://platform:secret@db1.internal:5432,db2.internal:5432/platform?target_session_attrs=read-write')).toBe(2)
  expect(hostsIn('postgres://a:5432,b:5432,c:5432?sslmode=require')).toBe(3)
  expect(hostsIn('postgres://localhost')).toBe(1)
})

test('one host: the deadline rounded up to a second; several: each host but the last reached within three quarters of the deadline (the time-out divided by the hosts)', () => {
  expect(connectTimeoutSeconds(2000, 1)).toBe(2)
  expect(connectTimeoutSeconds(100, 1)).toBe(1)
  expect(connectTimeoutSeconds(2000, 2) / 2).toBe(1.5)
  expect(connectTimeoutSeconds(1000, 3) / 3).toBe(0.75)
  expect(connectTimeoutSeconds(1200, 2) / 2).toBe(0.9)
  expect(connectTimeoutSeconds(1200, 2)).toBeGreaterThanOrEqual(1.2) // the start-up never gets less than the deadline
})
