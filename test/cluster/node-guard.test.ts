// The per-node guard of a cluster command connection (shared/redis/cluster-guard.ts, guardClusterNodes) on a real Redis Cluster of
// three masters with a replica each: an outcome is counted against the node the command was written to (a failover
// mid-flight leaves the promoted replica's breaker closed), the guard keeps health only for the nodes the cluster has
// (nodes replaced one after another leave nothing behind; a node that only reconnects keeps its breaker), and an ASK
// to a node whose breaker is open fails the command cleanly, without an unhandled rejection.
import { afterAll, beforeAll, expect, test } from 'bun:test'
import type { Cluster } from 'ioredis'
import { breakerCounts } from '../../shared/breaker'
import { commandConnection } from '../../shared/redis/client'
import { nodeBreakers } from '../../shared/redis/cluster-guard'
import { keySlot } from '../../shared/redis/key-slot'
import { RedisCluster } from './redis-cluster'

const cluster = new RedisCluster()
let client: Cluster
const unhandled: unknown[] = []
const onUnhandled = (reason: unknown) => unhandled.push(reason)

beforeAll(async () => {
  process.on('unhandledRejection', onUnhandled)
  await cluster.start(3, 1)
  client = commandConnection('node-guard-test', cluster.url) as Cluster
  // Ready, with a connection up to every master, before the first command: a command's timeout (1 s) runs while it is
  // queued, and a ping sent at once timed out while another file started its own cluster beside this one.
  await new Promise((resolve) => client.once('ready', resolve))
  await until(() => client.nodes('master').length === 3 && client.nodes('master').every((node) => node.status === 'ready'), 30_000)
  await client.ping()
}, 60_000)
afterAll(async () => {
  client?.disconnect()
  await cluster.stop()
  process.off('unhandledRejection', onUnhandled)
})

const address = (port: number) => `127.0.0.1:${port}`

/** Has the client read the slot map again. */
const refresh = () => new Promise<void>((resolve, reject) => client.refreshSlotsCache((error) => (error ? reject(error) : resolve())))

/** A key in a slot the node `port` serves, as the client's slot map says. */
function keyServedBy(port: number, prefix: string): string {
  for (let i = 0; ; i++) {
    const key = `node-guard:${prefix}:{${i}}`
    if (client.slots[keySlot(key)]?.[0] === address(port)) return key
  }
}

/** The masters serving slots, as the client's slot map (read again now) says. */
async function masters(): Promise<number[]> {
  await refresh()
  const nodes = new Set<string>()
  for (const owners of client.slots) if (owners) nodes.add(owners[0]!)
  return [...nodes].map((node) => Number(node.split(':')[1]))
}

/** The replica of master `port`, as the master reports it (INFO replication: slave0:ip=…,port=…), if it has one. */
async function replicaOf(port: number): Promise<number | undefined> {
  const replica = /slave0:ip=[^,]+,port=(\d+)/.exec(await cluster.cli(port, 'INFO', 'replication'))
  return replica ? Number(replica[1]) : undefined
}

/** The client's connection to the node `port`. */
const connectionTo = (port: number) => client.nodes('all').find((node) => `${node.options.host}:${node.options.port}` === address(port))

async function until(condition: () => boolean | Promise<boolean>, ms = 5000) {
  for (const deadline = Date.now() + ms; !(await condition()); await Bun.sleep(20)) {
    if (Date.now() > deadline) throw new Error('condition not met in time')
  }
}

test('a write left unanswered on a master whose replica is promoted meanwhile counts against that master: the promoted replica\'s breaker stays closed and it serves the slot', async () => {
  const master = (await masters())[0]!
  const replica = (await replicaOf(master))!
  const key = keyServedBy(master, 'failover')
  expect(await client.set(key, '1')).toBe('OK')
  // The master stalls: a write sent to it gets no answer (reads, CLUSTER SLOTS among them, still do).
  await cluster.cli(master, 'CLIENT', 'PAUSE', '5000', 'WRITE')
  try {
    let settled = false
    const inFlight = client.set(key, '2').catch((error: Error) => error).finally(() => (settled = true))
    await Bun.sleep(50)
    // Its replica takes over, and the client learns it while the write is still waiting on the old master.
    await cluster.cli(replica, 'CLUSTER', 'FAILOVER', 'TAKEOVER')
    await until(async () => {
      await refresh()
      return client.slots[keySlot(key)]?.[0] === address(replica)
    }, 700)
    expect(settled).toBe(false)
    // Timed out, or lost with the connection the client closes once the old master serves nothing.
    expect(String(await inFlight)).toMatch(/timed out|Connection is closed/)

    expect(nodeBreakers(client).get(address(replica))).toBe(false)
    expect(await client.set(key, '3')).toBe('OK')
    expect(await cluster.cli(replica, 'GET', key)).toBe('3\n')
  } finally {
    await cluster.cli(master, 'CLIENT', 'UNPAUSE')
  }
  await cluster.untilServedBy(keySlot(key), replica) // every node agrees before the next test reads the cluster
}, 20_000)

test('the guard keeps health only for the nodes the cluster has: nodes added and removed one after another leave no entry behind, and a node that only reconnects keeps its breaker', async () => {
  const removed: string[] = []
  for (let round = 0; round < 3; round++) {
    // A new node (a new address) joins as a replica, enters the slot map, and leaves the cluster.
    const master = (await masters())[round]!
    const added = await cluster.addReplica(master)
    const key = keyServedBy(master, `replaced-${round}`)
    await until(async () => {
      await client.set(key, String(Date.now())) // a replica is in the slot map once it has replicated something
      await refresh()
      return nodeBreakers(client).has(address(added))
    }, 10_000)
    await cluster.removeNode(added)
    removed.push(address(added))
    await until(async () => {
      await refresh()
      return !nodeBreakers(client).has(address(added))
    })
    // One entry at most per node the cluster has.
    expect(removed.filter((node) => nodeBreakers(client).has(node))).toEqual([])
    expect(nodeBreakers(client).size).toBeLessThanOrEqual(cluster.ports.length)
  }

  // A master stops answering its clients long enough to open its breaker; its connection then ends and a new one is
  // made to the same address, whose handshake the node does not answer either: the breaker it earned is kept, not reset
  // by the new connection. (CLIENT PAUSE ALL, not SIGSTOP: the node keeps talking to the cluster bus, so no failover.)
  const master = (await masters())[0]!
  const key = keyServedBy(master, 'reconnect')
  await cluster.cli(master, 'CLIENT', 'PAUSE', '10000', 'ALL')
  try {
    expect(String(await client.set(key, 'x').catch((error: Error) => error))).toMatch(/timed out/)
    expect(nodeBreakers(client).get(address(master))).toBe(true)
    const before = connectionTo(master)!
    const ended = new Promise((resolve) => client.once('-node', resolve))
    before.disconnect()
    await ended
    await refresh()
    expect(connectionTo(master)).not.toBe(before)
    expect(nodeBreakers(client).get(address(master))).toBe(true)
  } finally {
    await cluster.cli(master, 'CLIENT', 'UNPAUSE')
  }
}, 60_000)

test('an ASK to a node whose breaker is open: the command fails at once with the words of a dead link, the ASKING refused with it is no unhandled rejection, and the node that answered ASK is not blamed', async () => {
  const [source, target] = await masters()
  const key = keyServedBy(source!, 'asked') // absent on the source: while its slot migrates, the source answers ASK
  const stalled = keyServedBy(target!, 'stalled')
  await cluster.migrateSlot(keySlot(key), target!, async () => {
    // The target stalls long enough to open its breaker.
    await cluster.cli(target!, 'CLIENT', 'PAUSE', '1500', 'WRITE')
    try {
      expect(String(await client.set(stalled, 'x').catch((error: Error) => error))).toMatch(/timed out/)
      expect(nodeBreakers(client).get(address(target!))).toBe(true)
      const started = Date.now()
      const refused = await client.set(key, 'x').catch((error: Error) => error)
      expect(Date.now() - started).toBeLessThan(500)
      expect(String(refused)).toBe('Error: Connection is closed.')
      await Bun.sleep(100) // an unhandled rejection is reported once the microtasks have run
      expect(unhandled).toEqual([])
      expect(nodeBreakers(client).get(address(source!))).toBe(false)
    } finally {
      await cluster.cli(target!, 'CLIENT', 'UNPAUSE')
    }
  })
  // Once the slot has moved and the target's cool-down is over, the write lands on the target.
  await refresh()
  await until(async () => (await client.set(key, 'y').catch(() => '')) === 'OK')
  expect(await cluster.cli(target!, 'GET', key)).toBe('y\n')
  expect(unhandled).toEqual([])
}, 20_000)

test('a write that timed out on a master whose slot then moved is never run elsewhere: the MOVED the master answers it with later is not followed', async () => {
  const [source, target] = await masters()
  const key = keyServedBy(source!, 'late') // its slot holds no key: the migration below moves nothing
  const movedAnswers = async () => Number(/^errorstat_MOVED:count=(\d+)/m.exec(await cluster.cli(source!, 'INFO', 'errorstats'))?.[1] ?? 0)
  const movedBefore = await movedAnswers()
  await cluster.cli(source!, 'CLIENT', 'PAUSE', '10000', 'WRITE')
  try {
    expect(String(await client.set(key, 'told-failed').catch((error: Error) => error))).toMatch(/timed out/)
    // The slot moves while the write still waits on the source.
    await cluster.migrateSlot(keySlot(key), target!)
  } finally {
    await cluster.cli(source!, 'CLIENT', 'UNPAUSE')
  }
  // Unpaused, the source answers the waiting write with MOVED: following it would store what the caller heard failed.
  await until(async () => (await movedAnswers()) > movedBefore)
  await Bun.sleep(200)
  expect(await cluster.cli(target!, 'GET', key)).toBe('\n')
  await refresh()
  expect(await client.set(key, 'later')).toBe('OK')
  expect(await cluster.cli(target!, 'GET', key)).toBe('later\n')
}, 20_000)

test('a master dropped from the cluster after a failover while its breaker is open takes its open count with it: platform_breaker_open counts the open breakers of the nodes there are', async () => {
  // Besides this client's node breakers, the count holds those of any other Redis client of the process (other files'
  // under a whole-suite run): what is not this client's must not change.
  const others = () => (breakerCounts.open.get('redis') ?? 0) - [...nodeBreakers(client).values()].filter(Boolean).length
  const othersBefore = others()
  // A shard whose replica has no breaker a test before left open (the first test's old master is a replica now, its
  // breaker open): promoted, it would refuse the last write below while ioredis' READWRITE to it is the probe.
  const shards = await Promise.all((await masters()).map(async (master) => ({ master, replica: await replicaOf(master) })))
  const { master, replica } = shards.find(({ replica }) => replica !== undefined && nodeBreakers(client).get(address(replica)) !== true)!
  const key = keyServedBy(master, 'dropped-open')
  // Stopped (SIGSTOP) until the finally resumes it: it answers nothing before the check below, however long the
  // failover takes. A CLIENT PAUSE cannot do this: its time runs out on its own (10 s did not outlast the failover on a
  // loaded machine; the master answered and closed its breaker before the check), and the UNPAUSE that would end it
  // sooner waits out a PAUSE ALL like any other command. The node's cluster bus stops with it: no matter here, as its
  // replica takes over without it.
  cluster.silence(master)
  try {
    // Timed out, or refused at once when the test before left this node's breaker open.
    expect(String(await client.set(key, 'x').catch((error: Error) => error))).toMatch(/timed out|Connection is closed/)
    expect(nodeBreakers(client).get(address(master))).toBe(true)
    await cluster.cli(replica!, 'CLUSTER', 'FAILOVER', 'TAKEOVER')
    await cluster.untilServedBy(keySlot(key), replica!, [master]) // the stopped master would never answer
  } finally {
    cluster.resume(master)
  }
  // Checked as it resumes, before it can answer anything: nothing sent to it since its breaker opened closed it.
  // Still open, or already forgotten (the client may have read the new slot map, which names it no more).
  expect(nodeBreakers(client).get(address(master))).not.toBe(false)
  await cluster.removeNode(master)
  await until(async () => {
    await refresh()
    return !nodeBreakers(client).has(address(master))
  }, 10_000)
  expect(others()).toBe(othersBefore)
  expect(await client.set(key, 'y')).toBe('OK')
}, 40_000)
