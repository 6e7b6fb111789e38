// Tracking's entity: the events a product captures (tracking_events_capture).
import { EVENTS_SOURCE, eventIdentity } from '../../../../../shared/analytics/events'
import type { Entity } from '../entity'

export const eventsEntities: Entity[] = [{
  entity: 'events',
  extensionSlug: 'tracking',
  entityName: 'Tracked events',
  description: 'Events the product captured with tracking_events_capture, one row per event',
  timeColumn: 'timestamp',
  propertiesColumn: 'properties',
  dimensions: [
    { name: 'event', description: 'The event name', sql: 's.event' },
    { name: 'users_id', description: "The user's id in the product, when the event names one", sql: 's.users_id' },
    { name: 'anonymous_id', description: 'The anonymous id, when the event names one', sql: 's.anonymous_id' },
  ],
  metrics: [
    { name: 'count', type: 'count', description: 'Number of events', sql: 'count(*)' },
    {
      name: 'identities', type: 'count', description: 'Number of distinct identities (users_id, else anonymous_id, email or phone)',
      sql: `count(distinct ${eventIdentity('s')})`,
    },
  ],
  identityKinds: ['email', 'phone', 'users_id', 'anonymous_id'],
  source: `${EVENTS_SOURCE} s`,
  time: 's.ts',
  properties: 's.properties',
  identity: { email: 's.email', phone: 's.phone', users_id: 's.users_id', anonymous_id: 's.anonymous_id' },
  event: 's.event',
  rowId: 's.id',
  rollups: true,
}]
