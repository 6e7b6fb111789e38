// The gateway's local registry: a shard is wanted exactly while one of its channels has a subscriber here.
import { expect, test } from 'bun:test'
import { Hub, type Position, type Subscriber, topicOf } from '../../gateway/hub'
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
  expect(hub.subscribe(product, 'chat:a', x)).toBe(shard)
  expect(hub.subscribe(product, 'chat:a', y)).toBe(shard)
  expect(hub.wantedShards).toEqual([shard])
  expect(hub.unsubscribe(product, 'chat:a', x)).toBeNull() // y is still there
  expect(hub.unsubscribe(product, 'chat:a', y)).toBe(shard) // now nobody here reads that shard's channels
  expect(hub.wantedShards).toEqual([])
  expect(hub.unsubscribe(product, 'chat:a', y)).toBeNull() // leaving twice changes nothing
})

test('a publication reaches each pending subscriber of its (product, channel) once, except the skipped sender', () => {
  const hub = new Hub<Recorder>()
  const [x, y, z] = [new Recorder('x'), new Recorder('y'), new Recorder('z')]
  hub.subscribe(product, 'chat:a', x)
  hub.subscribe(product, 'chat:a', y)
  hub.subscribe('00000000-0000-4000-8000-000000000002', 'chat:a', z) // same name, another product
  const topics: string[] = []
  expect(hub.publish(product, 'chat:a', undefined, 'frame', (t) => topics.push(t), 'y')).toBe(true)
  expect([x.got, y.got, z.got]).toEqual([['frame'], [], []])
  expect(topics).toEqual([]) // nobody is live yet: no topic publish
  expect(hub.publish(product, 'chat:b', undefined, 'frame', (t) => topics.push(t))).toBe(false)
  expect(hub.subscriptionsOf(shardOf(product, 'chat:a')).map((s) => s.subscriber.id).sort()).toEqual(['x', 'y'])
})

test('a live subscriber is reached through one topic publish, never through deliver; the shard stays wanted while it is live', () => {
  const hub = new Hub<Recorder>()
  const [x, y] = [new Recorder('x'), new Recorder('y')]
  hub.subscribe(product, 'chat:a', x)
  hub.subscribe(product, 'chat:a', y)
  expect(hub.goLive(product, 'chat:a', x)).toBe(topicOf(product, 'chat:a'))
  expect(hub.goLive(product, 'chat:a', x)).toBeNull() // already live
  const topics: string[] = []
  hub.publish(product, 'chat:a', undefined, 'frame', (t) => topics.push(t))
  expect(topics).toEqual([topicOf(product, 'chat:a')])
  expect([x.got, y.got]).toEqual([[], ['frame']])
  expect([...hub.liveOf(topicOf(product, 'chat:a'))]).toEqual([x])
  expect(hub.subscriptionsOf(shardOf(product, 'chat:a')).map((s) => s.subscriber.id).sort()).toEqual(['x', 'y'])
  expect(hub.unsubscribe(product, 'chat:a', y)).toBeNull()
  expect(hub.unsubscribe(product, 'chat:a', x)).toBe(shardOf(product, 'chat:a'))
  expect(hub.goLive(product, 'chat:a', x)).toBeNull() // gone
})

test('the topic is published before pending subscribers are handed the frame, so one that goes live meanwhile gets it once', () => {
  const hub = new Hub<Subscriber>()
  const order: string[] = []
  const switcher: Subscriber = {
    id: 's',
    deliver: () => {
      order.push('deliver')
      hub.goLive(product, 'chat:a', switcher)
    },
  }
  const live = new Recorder('l')
  hub.subscribe(product, 'chat:a', live)
  hub.goLive(product, 'chat:a', live)
  hub.subscribe(product, 'chat:a', switcher)
  hub.publish(product, 'chat:a', undefined, 'one', () => order.push('topic'))
  expect(order).toEqual(['topic', 'deliver'])
  hub.publish(product, 'chat:a', undefined, 'two', () => order.push('topic'))
  expect(order).toEqual(['topic', 'deliver', 'topic']) // now live: the topic only
})

test('the watch hears a channel\'s first subscriber here and its last leaving, once each (the occupancy leases)', () => {
  const heard: string[] = []
  const hub = new Hub<Recorder>({ first: (p, c) => heard.push(`first ${p === product} ${c}`), last: (p, c) => heard.push(`last ${p === product} ${c}`) })
  const [x, y] = [new Recorder('x'), new Recorder('y')]
  hub.subscribe(product, 'chat:a', x)
  hub.subscribe(product, 'chat:a', y)
  hub.subscribe(product, 'chat:b', x)
  hub.unsubscribe(product, 'chat:a', x)
  hub.unsubscribe(product, 'chat:a', y)
  hub.unsubscribe(product, 'chat:a', y) // twice: nothing more
  expect(heard).toEqual(['first true chat:a', 'first true chat:b', 'last true chat:a'])
})

test('the watch hears each count between the first subscriber and the last (the active channels\' subscribers)', () => {
  const heard: string[] = []
  const hub = new Hub<Recorder>({
    first: (_p, c) => heard.push(`first ${c}`), last: (_p, c) => heard.push(`last ${c}`), counted: (_p, c, n) => heard.push(`${c} ${n}`),
  })
  const [x, y, z] = [new Recorder('x'), new Recorder('y'), new Recorder('z')]
  hub.subscribe(product, 'chat:a', x)
  hub.subscribe(product, 'chat:a', y)
  hub.subscribe(product, 'chat:a', y) // already there: no change
  hub.subscribe(product, 'chat:a', z)
  hub.unsubscribe(product, 'chat:a', y)
  hub.unsubscribe(product, 'chat:a', x)
  hub.unsubscribe(product, 'chat:a', z)
  expect(heard).toEqual(['first chat:a', 'chat:a 2', 'chat:a 3', 'chat:a 2', 'chat:a 1', 'last chat:a'])
})
