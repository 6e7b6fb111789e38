// Delegated tokens without a key store: signed with a key in hand, verified against an in-memory key set; and what a
// token may carry, narrowed by namespace policy and grants, from policies given as values.
import { describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { narrow } from '../../shared/realtime/token-issue'
import { config } from '../../shared/config'
import { allowedOps } from '../../shared/realtime/grants'
import { grantMatches, type Op } from '../../shared/realtime/names'
import type { NamespacePolicy, ProductPolicies } from '../../shared/realtime/policies'
import { type Claims, type SigningKey, signClaims, type TokenFailure, verifyWith } from '../../shared/realtime/tokens'

const key: SigningKey = { kid: '00000000-0000-4000-8000-00000000000a', secret: randomBytes(32) }
const other: SigningKey = { kid: '00000000-0000-4000-8000-00000000000b', secret: randomBytes(32) }
/** The verifier's key set: `key` only. */
const keys = async (kid: string) => (kid === key.kid ? key.secret : null)
const NOW = 1_800_000_000

const claims = (extra: Partial<Claims> = {}): Claims => ({
  sub: 'ext:ann', ext: true, pid: '00000000-0000-4000-8000-000000000001', akid: '00000000-0000-4000-8000-000000000002',
  env: config.environment, channels: [{ name: 'chat:1', ops: ['subscribe'] }], iat: NOW, exp: NOW + 60, jti: 'j', ...extra,
})

const refusal = (token: string, now = NOW) => verifyWith(token, keys, now).then(() => 'accepted', (error) => (error as { reason: TokenFailure }).reason)

describe('token verification', () => {
  test('a token signed with a key of the set verifies to its claims until it expires', async () => {
    const token = signClaims(key, claims())
    expect(await verifyWith(token, keys, NOW)).toEqual(claims())
    expect(await refusal(token, NOW + 59)).toBe('accepted')
    expect(await refusal(token, NOW + 60)).toBe('expired')
  })

  test('an unknown kid, a wrong signature, another environment and a bad shape are each refused for their reason', async () => {
    expect(await refusal(signClaims(other, claims()))).toBe('unknown_key')
    const [header, payload] = signClaims(key, claims()).split('.')
    expect(await refusal(`${header}.${payload}.${signClaims(other, claims()).split('.')[2]}`)).toBe('bad_signature')
    expect(await refusal(signClaims(key, claims({ env: `${config.environment}-other` })))).toBe('wrong_environment')
    expect(await refusal(signClaims(key, { ...claims(), sub: 'ann' }))).toBe('malformed')
    expect(await refusal('a.b')).toBe('malformed')
    expect(await refusal(signClaims({ ...key, kid: 'not-a-uuid' }, claims()))).toBe('malformed')
  })
})

const policy = (name: string, extra: Partial<NamespacePolicy> = {}): NamespacePolicy => ({
  name, presence: true, clientEvents: false, history: null, broker: { historyTtlSeconds: 0, historySize: 0 }, ...extra,
})

describe('grants', () => {
  test('`*` matches exactly one segment, and the segment counts must be equal', () => {
    expect(grantMatches('chat:*', 'chat:room')).toBe(true)
    expect(grantMatches('chat:*', 'chat:room:42')).toBe(false)
    expect(grantMatches('chat:*:42', 'chat:room:42')).toBe(true)
    expect(grantMatches('chat:room', 'chat:hall')).toBe(false)
  })

  test('a namespace with grants delegates only what a matching grant lists, never more than its policy allows', () => {
    const grants: { pattern: string; ops: Op[] }[] = [{ pattern: 'chat:*', ops: ['subscribe', 'publish'] }, { pattern: 'news:*', ops: ['history'] }]
    expect(allowedOps(policy('chat'), grants, 'chat:room')).toEqual(['subscribe']) // publish: client events are off
    expect(allowedOps(policy('chat'), grants, 'chat:room:42')).toEqual([]) // no grant matches
    expect(allowedOps(policy('live'), grants, 'live:room')).toEqual(['subscribe', 'presence']) // no grants of its own
  })
})

describe('narrowing a token request', () => {
  const policies: ProductPolicies = {
    namespaces: new Map([['chat', policy('chat')]]),
    grants: [{ pattern: 'chat:open', ops: ['subscribe', 'presence'] }, { pattern: 'chat:quiet', ops: ['subscribe'] }],
    payloadBucket: null,
  }

  test('unregistered namespaces and refused operations are dropped with their reason; a channel named twice gets the union', () => {
    const { granted, dropped } = narrow(policies, [
      { name: 'chat:open', ops: ['presence'] }, { name: 'gone:x', ops: ['subscribe'] },
      { name: 'chat:quiet', ops: ['presence', 'subscribe'] }, { name: 'chat:open', ops: ['subscribe'] },
    ])
    expect(granted).toEqual([{ name: 'chat:open', ops: ['subscribe', 'presence'] }, { name: 'chat:quiet', ops: ['subscribe'] }])
    expect(dropped).toEqual([
      { name: 'gone:x', ops: ['subscribe'], reason: 'namespace_not_registered' },
      { name: 'chat:quiet', ops: ['presence'], reason: 'not_allowed' },
    ])
  })
})
