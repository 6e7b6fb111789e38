// Each worker's Prometheus listener (shared/metrics/serve.ts, docs/metrics.md).
import { area, integer, secret, text } from '../variable'

export const metrics = area('Metrics',
  'Each worker\'s Prometheus listener, on a port of its own (workers share their service port). [Metrics](metrics.md).', {
    port: integer('METRICS_PORT', {
      default: 0, min: 0, max: 65_535,
      description: 'The port `/metrics` is served on; 0: no metrics listener.',
    }),
    portOffset: integer('METRICS_PORT_OFFSET', {
      default: 0, min: 0, max: 65_535,
      description: 'Under foreman, which gives each instance its own `PORT`: the metrics port is `PORT` + this (0: not used).',
    }),
    host: text('METRICS_HOST', {
      default: '127.0.0.1',
      description: 'The address the metrics listener binds; other than loopback, `METRICS_TOKEN` is required.',
    }),
    token: secret('METRICS_TOKEN', {
      rule: 'any text', unset: '',
      description: 'When set, a scrape must send `Authorization: Bearer <this>`; otherwise 401.',
    }),
    countCacheMs: integer('METRICS_COUNT_CACHE_MS', {
      default: 5000, min: 100, max: 60_000,
      description: 'How long a gauge counted in PostgreSQL at scrape time (mail queue, pending deliveries) is reused, in ms.',
    }),
  })
