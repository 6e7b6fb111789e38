// The gateway's local registry: a shard is wanted exactly while one of its channels has a subscriber here.
import { expect, test } from 'bun:test'
import { Hub, type Position, type Subscriber } from '../../gateway/hub'
import { shardOf } from '../../shared/realtime/shards'

class Recorder implements Subscriber {
  readonly got: string[] = []
  constructor(readonly id: string) {}
  deliver(_channel: string, _position: Position | undefined, frame: string) {
    this.got.push(frame)
  }
}

const product = '00000000-0000-4000-8000-000000000001'

test('the first channel of a shard makes it wanted; it stays wanted until the last subscriber of its last channel leaves', () => {
  const hub = new Hub<Recorder>()
  const [x, y] = [new Recorder('x'), new Recorder('y')]
  const shard = shardOf(product, 'chat:a')
  expect(hub.subscribe(product, 'chat:a', x)).toEqual({ shard, firstOfShard: true })
  expect(hub.subscribe(product, 'chat:a', y).firstOfShard).toBe(false)
  expect(hub.wantedShards).toEqual([shard])
  expect(hub.unsubscribe(product, 'chat:a', x)).toBeNull() // y is still there
  expect(hub.unsubscribe(product, 'chat:a', y)).toBe(shard) // now nobody here reads that shard's channels
  expect(hub.wantedShards).toEqual([])
  expect(hub.unsubscribe(product, 'chat:a', y)).toBeNull() // leaving twice changes nothing
})

test('a publication reaches each subscriber of its (product, channel) once, except the skipped sender', () => {
  const hub = new Hub<Recorder>()
  const [x, y, z] = [new Recorder('x'), new Recorder('y'), new Recorder('z')]
  hub.subscribe(product, 'chat:a', x)
  hub.subscribe(product, 'chat:a', y)
  hub.subscribe('00000000-0000-4000-8000-000000000002', 'chat:a', z) // same name, another product
  expect(hub.publish(product, 'chat:a', undefined, 'frame', 'y')).toBe(1)
  expect([x.got, y.got, z.got]).toEqual([['frame'], [], []])
  expect(hub.subscriptionsOf(shardOf(product, 'chat:a')).map((s) => s.subscriber.id).sort()).toEqual(['x', 'y'])
})
