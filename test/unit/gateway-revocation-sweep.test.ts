// The gateway's answers to revocation invalidations (gateway/sweeps.ts) over the in-memory fakes: a credential's end
// closes the connections holding it, found through the credential index; a member removal re-checks that user's
// console connections only.
import { expect, test } from 'bun:test'
import { RevocationSweep } from '../../gateway/sweeps'
import { credentialKey } from '../../shared/realtime/revocations'
import { memoryGateway, namespace, PRODUCT, request } from './gateway-fakes'

const ALICE = '00000000-0000-4000-8000-0000000000a1'
const SESSION = '00000000-0000-4000-8000-0000000000c1'
const OTHER_SESSION = '00000000-0000-4000-8000-0000000000c2'
const PLATFORM_KEY = '00000000-0000-4000-8000-0000000000d1'
const RTK = '00000000-0000-4000-8000-0000000000e1'

async function setUp() {
  const gateway = memoryGateway([namespace('chat')])
  const marked: { akid: string; held: boolean }[] = []
  const markRevoked = gateway.backends.revocations.markRevoked
  gateway.backends.revocations.markRevoked = (akid, held) => (marked.push({ akid, held }), markRevoked(akid, held))
  const connected = async (akid: string, sub: string) => {
    const opened = gateway.open()
    await request(opened.connection, { type: 'connect', id: 1, token: gateway.token([{ name: 'chat:x', ops: ['subscribe'] }], akid, sub) })
    expect(opened.connection.claims?.akid).toBe(akid)
    return opened
  }
  const sweep = new RevocationSweep(gateway.context.connections, gateway.context.credentials!, gateway.backends.revocations)
  const connections = {
    alice: await connected(SESSION, `ext:console:${ALICE}`),
    aliceElsewhere: await connected(OTHER_SESSION, `ext:console:${ALICE}`),
    platformKey: await connected(PLATFORM_KEY, `ext:console:${PLATFORM_KEY}`),
    rtk: await connected(RTK, 'ext:someone'),
  }
  return { gateway, sweep, marked, connections }
}

test('a member removal: only that user\'s console connections are asked about and closed; their cached answers alone are dropped; platform-key and rtk_ connections stay', async () => {
  const { gateway, sweep, connections } = await setUp()
  try {
    gateway.denied.add(credentialKey({ akid: SESSION, pid: PRODUCT }))
    const asked: string[] = []
    const revokedAmong = gateway.backends.revocations.revokedAmong
    gateway.backends.revocations.revokedAmong = (credentials) => revokedAmong([...credentials].map((c) => (asked.push(c.akid), c)))
    await sweep.memberRemoved(ALICE)
    expect(gateway.forgottenUsers).toEqual([ALICE])
    expect(asked.sort()).toEqual([SESSION, OTHER_SESSION].sort())
    expect(connections.alice.transport.closed).toEqual({ code: 4001, reason: 'invalid token: console access ended' })
    for (const other of [connections.aliceElsewhere, connections.platformKey, connections.rtk]) expect(other.transport.closed).toBeUndefined()
  } finally {
    sweep.stop()
  }
})

test('a credential\'s end closes the connections holding it; one no connection holds is passed on as not held', async () => {
  const { gateway, sweep, marked, connections } = await setUp()
  try {
    sweep.heard('00000000-0000-4000-8000-0000000000ff')
    sweep.heard(PLATFORM_KEY)
    expect(marked).toEqual([{ akid: '00000000-0000-4000-8000-0000000000ff', held: false }, { akid: PLATFORM_KEY, held: true }])
    expect(connections.platformKey.transport.closed).toEqual({ code: 4001, reason: 'invalid token: console access ended' })
    for (const other of [connections.alice, connections.aliceElsewhere, connections.rtk]) expect(other.transport.closed).toBeUndefined()
    // A closed connection leaves the index: its credential's end is not "held" any more.
    await Bun.sleep(0)
    sweep.heard(PLATFORM_KEY)
    expect(marked.at(-1)).toEqual({ akid: PLATFORM_KEY, held: false })
    expect(gateway.context.connections.size).toBe(3)
  } finally {
    sweep.stop()
  }
})
