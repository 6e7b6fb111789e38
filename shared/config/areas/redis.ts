// Redis: where it is and how long a request waits for one command.
import { LOCAL_PORTS } from '../local-ports'
import { area, integer, url } from '../variable'

export const redis = area('Redis', 'One Redis, a Redis Cluster or a Sentinel-watched master, and how long a request waits for it.', {
  redisUrl: url('REDIS_URL', {
    default: `redis://127.0.0.1:${LOCAL_PORTS.redis}`, schemes: ['redis', 'rediss', 'redis+cluster', 'redis+sentinel'],
    description: '`redis://` one Redis, `redis+cluster://host:port,...` a cluster by its seed nodes, `redis+sentinel://[[user]:pass@]host:port,.../<master>[/<db>]` a master Sentinel watches. Redis 7.0 or newer: the publish is a Redis Function (`FCALL`), the Idempotency-Key claim `SET … NX GET`.',
  }),
  commandTimeoutMs: integer('REDIS_COMMAND_TIMEOUT_MS', {
    default: 1000, min: 50, max: 60_000,
    description: 'Longest a request waits for one Redis command before answering 503, in ms (blocking reads are exempt). On one Redis a sweep every eighth of it keeps the deadline, so a command times out up to about a quarter later.',
  }),
})
