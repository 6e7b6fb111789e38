// REDIS_URL: a plain redis:// URL is one Redis; redis+cluster:// names a Redis Cluster by its seed nodes.
import { expect, test } from 'bun:test'
import { clusterNodesOf, keySlot } from '../../shared/redis'

test('a cluster URL gives its seed nodes; a plain URL is not a cluster', () => {
  expect(clusterNodesOf('redis+cluster://127.0.0.1:7000,10.0.0.2:7001/')).toEqual([{ host: '127.0.0.1', port: 7000 }, { host: '10.0.0.2', port: 7001 }])
  expect(clusterNodesOf('redis+cluster://redis-a.internal:6379')).toEqual([{ host: 'redis-a.internal', port: 6379 }])
  expect(clusterNodesOf('redis://127.0.0.1:6379/1')).toBeNull()
})

test('a cluster URL with a database index, credentials or a node without a port is refused, naming the form', () => {
  for (const url of ['redis+cluster://127.0.0.1:7000/1', 'redis+cluster://user:pw@127.0.0.1:7000', 'redis+cluster://127.0.0.1', 'redis+cluster://']) {
    expect(() => clusterNodesOf(url)).toThrow(/redis\+cluster:\/\/host:port|is not host:port/)
  }
})

test("a key's cluster slot is Redis's: CRC16 of its hash tag mod 16384", () => {
  // Values from CLUSTER KEYSLOT on Redis 7.
  expect(keySlot('foo')).toBe(12182)
  expect(keySlot('{user1000}.following')).toBe(keySlot('user1000'))
  expect(keySlot('rt:{s3}:fan')).toBe(keySlot('s3'))
})
