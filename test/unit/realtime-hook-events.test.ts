// The webhook events' shapes, with nothing started: a hooks-stream entry back as its typed event, and the due index's members.
import { expect, test } from 'bun:test'
import { toHookEvent } from '../../shared/realtime/hook-events'
import { dueMember, parseDueMember } from '../../shared/realtime/hooks'

const product = '00000000-0000-4000-8000-000000000001'

test('an entry becomes its event: a stable id from shard and stream id, the payload per kind', () => {
  const added = toHookEvent(3, '1764082800123-0', ['product', product, 'channel', 'chat:room:1', 'kind', 'presence.member_added',
    'identity', 'ext:alice', 't', '1764082800120', 'seq', '7', 'info', '{"name":"Alice"}'])
  expect(added).toEqual({
    id: 'rt_3_1764082800123-0', productId: product, kind: 'presence.member_added', channel: 'chat:room:1', identity: 'ext:alice',
    occurredAt: '2025-11-25T15:00:00.120Z', sequence: 7,
    data: { channel: 'chat:room:1', namespace: 'chat', identity: 'ext:alice', info: { name: 'Alice' }, occurredAt: '2025-11-25T15:00:00.120Z', sequence: 7 },
  })
  const vacated = toHookEvent(0, '1-0', ['product', product, 'channel', 'chat:x', 'kind', 'channel.vacated', 'identity', '', 't', '0', 'seq', '2', 'info', ''])
  expect(vacated).toEqual({
    id: 'rt_0_1-0', productId: product, kind: 'channel.vacated', channel: 'chat:x', occurredAt: '1970-01-01T00:00:00.000Z', sequence: 2,
    data: { channel: 'chat:x', namespace: 'chat', occurredAt: '1970-01-01T00:00:00.000Z', sequence: 2 },
  })
  // Trimmed while pending: no event (the reader acknowledges it).
  expect(toHookEvent(0, '1-0', null)).toBeUndefined()
  // Info that is not JSON never throws (it would stall the shard's reader).
  expect(toHookEvent(0, '1-0', ['product', product, 'channel', 'chat:x', 'kind', 'presence.member_added', 'identity', 'i', 't', '0', 'seq', '1', 'info', '{'])!.data.info).toBeNull()
})

test('due index members split back into what, product and channel, colons in the channel included', () => {
  expect(parseDueMember(dueMember('p', product, 'chat:a:b'))).toEqual({ what: 'p', productId: product, channel: 'chat:a:b' })
  expect(parseDueMember(dueMember('o', product, 'x:'))).toEqual({ what: 'o', productId: product, channel: 'x:' })
  expect(parseDueMember('q:whatever:x')).toBeNull()
  expect(parseDueMember('p-nothing')).toBeNull()
})

test('an entry no script writes (a bad time, kind or id) is no event, never a throw (it would stall the shard); the sequence is the stream id', () => {
  const entry = (t: string, kind = 'channel.vacated') => ['product', product, 'channel', 'chat:x', 'kind', kind, 'identity', '', 't', t, 'info', '']
  for (const t of ['NaN', 'abc', '', '1e30', '-5', '1.5']) expect(toHookEvent(0, '1764082800123-4', entry(t))).toBeUndefined()
  expect(toHookEvent(0, '1764082800123-4', entry('0', 'channel.exploded'))).toBeUndefined()
  expect(toHookEvent(0, 'not-an-id', entry('0'))).toBeUndefined()
  expect(toHookEvent(0, '1764082800123-4', entry('1764082800120'))!.sequence).toBe(1_764_082_800_123_004)
})
