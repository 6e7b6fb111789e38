// The platform's TypeScript server SDK: one client per product, its areas as namespaces (realtime, mail, analytics),
// each call answering `{ data, error }`. fetch and WebCrypto only: Bun, Node 20+, Deno, edge runtimes. README.md.
import { createTransport, type TransportOptions } from './http.js'
import { mail } from './mail.js'
import { realtime } from './realtime.js'
import type { Answer, RequestBody, Result } from './types.js'
import { verifyWebhook } from './webhooks.js'

export interface PlatformOptions extends TransportOptions {
  /** The product's id (a UUID), as the console shows it. */
  productId: string
  /** A Realtime product API key (rtk_...) for `realtime.*`; each call needs the scope its route names. */
  realtimeKey?: string
  /** A Mail sending key (lmk_...) for `mail.*`; domains and templates need a full_access one. */
  mailKey?: string
  /** A capture key (ptk_...) for `analytics.capture`. */
  captureKey?: string
}

export type CaptureBatch = RequestBody<'capture_events_capture'>
export type CaptureResult = Answer<'capture_events_capture'>

/**
 * @example
 * const platform = new Platform({ baseUrl: 'https://public.example.com', productId, realtimeKey: process.env.RTK })
 * const { data, error } = await platform.realtime.messages.publish({ channel: 'chat:room-1', data: { text: 'hi' } })
 */
export class Platform {
  readonly realtime: ReturnType<typeof realtime>
  readonly mail: ReturnType<typeof mail>
  readonly analytics: { capture(batch: CaptureBatch): Promise<Result<CaptureResult>> }
  readonly webhooks = { verify: verifyWebhook }

  constructor(options: PlatformOptions) {
    const transport = createTransport(options)
    this.realtime = realtime(transport, options.productId, options.realtimeKey)
    this.mail = mail(transport, options.productId, options.mailKey)
    const key = { value: options.captureKey, option: 'captureKey', in: 'query' } as const
    this.analytics = {
      /** A batch of events; not idempotent, so retried only on 429 and 503 (refused before anything was stored). */
      capture: (batch) => transport.request<CaptureResult>({ method: 'POST', path: `/${encodeURIComponent(options.productId)}/capture`, body: batch, key }),
    }
  }
}

export { verifyWebhook, type VerifyWebhookInput } from './webhooks.js'
export type { TransportOptions } from './http.js'
export type * from './realtime.js'
export type * from './mail.js'
export type { Answer, OperationId, PlatformError, PlatformErrorCode, QueryOf, RequestBody, Result, SdkErrorCode } from './types.js'
export type { components, operations, paths } from './schema.js'
