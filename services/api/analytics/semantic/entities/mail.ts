// Mail's entities: the emails a product sent and their delivery events (docs/mail.md).
import { type Entity, NO_PROPERTIES_OR_IDENTITY, NOT_EVENTS } from '../entity'

export const mailEntities: Entity[] = [{
  entity: 'emails',
  extensionSlug: 'mail',
  entityName: 'Emails',
  description: 'Emails the product queued through the Mail public routes, with their latest event',
  timeColumn: 'created_at',
  ...NO_PROPERTIES_OR_IDENTITY,
  dimensions: [
    { name: 'status', description: 'The latest event: queued, sent, delivered, delivery_delayed, bounced, failed or suppressed', sql: 's.last_event' },
    { name: 'domain', description: 'The sending domain', sql: 's.domain_name' },
  ],
  metrics: [
    { name: 'count', type: 'count', description: 'Number of emails', sql: 'count(*)' },
    { name: 'delivered', type: 'count', description: 'Emails whose latest event is delivered', sql: "count(*) filter (where s.last_event = 'delivered')" },
    { name: 'bounced', type: 'count', description: 'Emails whose latest event is bounced', sql: "count(*) filter (where s.last_event = 'bounced')" },
    { name: 'recipients', type: 'sum', description: 'Recipients (to, cc and bcc) over all emails', sql: 'coalesce(sum(cardinality(s.to_addresses) + cardinality(s.cc_addresses) + cardinality(s.bcc_addresses)), 0)' },
    { name: 'avg_recipients', type: 'avg', description: 'Average recipients per email', sql: 'avg(cardinality(s.to_addresses) + cardinality(s.cc_addresses) + cardinality(s.bcc_addresses))' },
    {
      name: 'delivery_rate', type: 'ratio', description: 'Delivered emails divided by all emails',
      numerator: "count(*) filter (where s.last_event = 'delivered')", denominator: 'count(*)',
    },
    {
      name: 'bounce_rate', type: 'ratio', description: 'Bounced emails divided by all emails',
      numerator: "count(*) filter (where s.last_event = 'bounced')", denominator: 'count(*)',
    },
  ],
  source: '(select e.*, d.name as domain_name from emails e left join mail_domains d on d.id = e.domain_id) s',
  time: 's.created_at',
  ...NOT_EVENTS,
}, {
  entity: 'email_events',
  extensionSlug: 'mail',
  entityName: 'Email events',
  description: 'Every event of every email: queued, sent, delivered, delivery_delayed, bounced, failed, suppressed',
  timeColumn: 'at',
  ...NO_PROPERTIES_OR_IDENTITY,
  dimensions: [{ name: 'type', description: 'The event type', sql: 's.kind' }],
  metrics: [{ name: 'count', type: 'count', description: 'Number of events', sql: 'count(*)' }],
  source: '(select ev.id, ev.kind, ev.at, e.product_id from email_events ev join emails e on e.id = ev.email_id) s',
  time: 's.at',
  event: 's.kind',
  rowId: 's.id',
}]
