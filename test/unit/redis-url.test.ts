// REDIS_URL: a plain redis:// URL is one Redis; redis+cluster:// names a Redis Cluster by its seed nodes;
// redis+sentinel:// names a master by the sentinels that watch it.
import { expect, test } from 'bun:test'
import { keySlot } from '../../shared/redis/key-slot'
import { clusterNodesOf, databaseIndex, sentinelOf } from '../../shared/redis/url'

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

test('a Sentinel URL gives its sentinels, the master name, the database and the credentials; other forms are not one', () => {
  expect(sentinelOf('redis+sentinel://127.0.0.1:26379,10.0.0.2:26380/main')).toEqual({
    sentinels: [{ host: '127.0.0.1', port: 26379 }, { host: '10.0.0.2', port: 26380 }], name: 'main', db: 0,
  })
  expect(sentinelOf('redis+sentinel://:p%40ss@sentinel-a.internal:26379/my-master.1/3/')).toEqual({
    sentinels: [{ host: 'sentinel-a.internal', port: 26379 }], name: 'my-master.1', db: 3, password: 'p@ss',
  })
  expect(sentinelOf('redis+sentinel://app:pw@127.0.0.1:26379/main')).toMatchObject({ username: 'app', password: 'pw' })
  expect(sentinelOf('redis://127.0.0.1:6379/1')).toBeNull()
  expect(sentinelOf('redis+cluster://127.0.0.1:7000')).toBeNull()
  expect(clusterNodesOf('redis+sentinel://127.0.0.1:26379/main')).toBeNull()
})

test('a Sentinel URL without a master name, with a sentinel without a port, a bad index or a bare username is refused, naming the form and never the password', () => {
  for (const url of [
    'redis+sentinel://127.0.0.1:26379', 'redis+sentinel://127.0.0.1:26379/', 'redis+sentinel://127.0.0.1/main',
    'redis+sentinel:///main', 'redis+sentinel://127.0.0.1:26379/main/x', 'redis+sentinel://127.0.0.1:26379/main/1/2',
    'redis+sentinel://127.0.0.1:26379/main?db=1', 'redis+sentinel://user@127.0.0.1:26379/main',
    'redis+sentinel://:secret@127.0.0.1/main',
  ]) {
    expect(() => sentinelOf(url)).toThrow(/a Sentinel URL is redis\+sentinel:\/\/\[\[username\]:password@\]host:port\[,host:port\.\.\.\]\/<master-name>\[\/<db>\]$/)
  }
  expect(() => sentinelOf('redis+sentinel://:secret@127.0.0.1/main')).not.toThrow(/secret/)
})

test("a key's cluster slot is Redis's: CRC16 of its hash tag mod 16384", () => {
  // Values from CLUSTER KEYSLOT on Redis 7.
  expect(keySlot('foo')).toBe(12182)
  expect(keySlot('{user1000}.following')).toBe(keySlot('user1000'))
  expect(keySlot('rt:{s3}:fan')).toBe(keySlot('s3'))
})

test('the database a URL selects (function libraries are named by it: their state is per server)', () => {
  expect(databaseIndex('redis://127.0.0.1:6379/2')).toBe(2)
  expect(databaseIndex('rediss://user:pw@redis.internal:6380/11')).toBe(11)
  expect(databaseIndex('redis://127.0.0.1:6379')).toBe(0)
  expect(databaseIndex('redis://127.0.0.1:6379/')).toBe(0)
  expect(databaseIndex('redis+cluster://127.0.0.1:7000,127.0.0.1:7001')).toBe(0)
  expect(databaseIndex('redis+sentinel://10.0.0.1:26379/main/3')).toBe(3)
})
