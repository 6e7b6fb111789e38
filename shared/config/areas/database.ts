// PostgreSQL: where it is and how long a request waits for it.
import { LOCAL_PORTS } from '../local-ports'
import { area, integer, url } from '../variable'

export const database = area('PostgreSQL', 'The primary every process writes to, and how long a request waits for it.', {
  databaseUrl: url('DATABASE_URL', {
    default: `postgres://postgres@127.0.0.1:${LOCAL_PORTS.postgres}/platform`, schemes: ['postgres', 'postgresql'],
    description: 'The PostgreSQL primary (several hosts, comma-separated, for a failover pair).',
  }),
  timeoutMs: integer('DB_TIMEOUT_MS', {
    default: 2000, min: 100, max: 60_000,
    description: 'Longest a request waits for PostgreSQL per statement or per transaction before answering 503, in ms.',
  }),
  coolDownMs: integer('DB_COOL_DOWN_MS', {
    default: 1000, min: 0, max: 60_000,
    description: 'After a connection failure, requests needing PostgreSQL get 503 at once for this long (ms), then one probes.',
  }),
})
