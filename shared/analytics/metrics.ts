// Event capture's metric (docs/metrics.md): events stored, by the route that took them. The api and public workers both
// capture (shared/analytics/capture.ts), so it is declared here, once per process that loads it. No product or key label.
import { counter } from '../metrics/registry'

export type CaptureSource = 'api' | 'public'

/** Events stored: `api` by tracking_events_capture, `public` by the public capture route (a publishable key). */
export const eventsCaptured = counter('tracking_events_captured_total', 'Events stored, by the route that took them (api, public)', ['source'])
