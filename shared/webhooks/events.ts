// The webhook event kinds of each area that has webhooks: the one list that management validates against, the docs
// (docs/webhooks.md) describe and the delivery slice will emit. An endpoint subscribes to kinds of its own area only.
import type { Area } from '../catalog/operation'

export const EVENT_KINDS = {
  realtime: ['channel.occupied', 'channel.vacated', 'presence.member_added', 'presence.member_removed', 'message.published'],
  mail: [
    'email.sent', 'email.delivered', 'email.delivery_delayed', 'email.bounced', 'email.failed', 'email.suppressed',
    'domain.verification_changed',
  ],
} as const satisfies Partial<Record<Area, readonly string[]>>

/** The areas with a webhook management surface (`/<area>/webhooks`, tools `<area>_webhooks_*`). */
export type WebhookArea = keyof typeof EVENT_KINDS
export const WEBHOOK_AREAS = Object.keys(EVENT_KINDS) as WebhookArea[]

export type EventKind<A extends WebhookArea = WebhookArea> = (typeof EVENT_KINDS)[A][number]

/** Subscribes an endpoint to every kind of its area, those added later included; alone in its list. */
export const ALL_KINDS = '*'
