// Realtime's entities: traffic and connections, counted by the public workers and gateways and flushed per minute
// (shared/realtime/usage.ts).
import { type Entity, NO_PROPERTIES_OR_IDENTITY, NOT_EVENTS } from '../entity'

/** Both are counters flushed per minute: no properties, nobody named, no events. */
const PER_MINUTE = { extensionSlug: 'realtime', timeColumn: 'minute', time: 's.minute', ...NO_PROPERTIES_OR_IDENTITY, ...NOT_EVENTS }

export const realtimeEntities: Entity[] = [{
  entity: 'realtime_usage',
  ...PER_MINUTE,
  entityName: 'Realtime usage',
  description: 'Publishes, deliveries and bytes per namespace and minute, counted by the public workers and gateways',
  dimensions: [{ name: 'namespace', description: 'The channel namespace', sql: 's.namespace' }],
  metrics: [
    { name: 'publishes', type: 'sum', description: 'Messages published (REST publishes and client events)', sql: 'coalesce(sum(s.publishes), 0)' },
    { name: 'deliveries', type: 'sum', description: 'Messages delivered to subscribed connections', sql: 'coalesce(sum(s.deliveries), 0)' },
    { name: 'bytes', type: 'sum', description: 'Serialized bytes published', sql: 'coalesce(sum(s.bytes), 0)' },
    { name: 'deliveries_per_publish', type: 'ratio', description: 'Deliveries divided by publishes (fan-out)', numerator: 'sum(s.deliveries)', denominator: 'sum(s.publishes)' },
  ],
  source: 'realtime_usage s',
}, {
  entity: 'realtime_connections',
  ...PER_MINUTE,
  entityName: 'Realtime connections',
  description: 'WebSocket connections per gateway process and minute: opened, closed, and the most open at once',
  dimensions: [{ name: 'gateway', description: 'The gateway process (host:pid)', sql: 's.gateway' }],
  metrics: [
    { name: 'opened', type: 'sum', description: 'Connections that presented a valid token', sql: 'coalesce(sum(s.opened), 0)' },
    { name: 'closed', type: 'sum', description: 'Connections that closed', sql: 'coalesce(sum(s.closed), 0)' },
    {
      name: 'connection_minutes', type: 'sum',
      description: 'The most connections open at once in each minute, summed over minutes and gateways (with an hour bucket: connection-minutes)',
      sql: 'coalesce(sum(s.peak), 0)',
    },
  ],
  source: 'realtime_connection_minutes s',
}]
