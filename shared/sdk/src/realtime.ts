// The Realtime routes, with the product API key (rtk_): gateway tokens, publish and broadcast (each with an
// Idempotency-Key so a retry publishes once), channel status, history, presence and the archive's pages.
import type { Transport } from './http.js'
import type { Answer, QueryOf, RequestBody, Result } from './types.js'

export type TokenIssueRequest = RequestBody<'realtime_tokens_issue'>
export type TokenIssueResult = Answer<'realtime_tokens_issue'>
export type PublishRequest = RequestBody<'realtime_messages_publish'>
export type Publication = Answer<'realtime_messages_publish'>
export type BroadcastRequest = RequestBody<'realtime_messages_broadcast'>
export type BroadcastResult = Answer<'realtime_messages_broadcast'>
export type ChannelStatus = Answer<'realtime_channel_get'>
export type HistoryQuery = QueryOf<'realtime_history_read'>
export type HistoryResult = Answer<'realtime_history_read'>
export type ArchiveQuery = QueryOf<'realtime_archive_read'>
export type ArchivePage = Answer<'realtime_archive_read'>
export type Presence = Answer<'realtime_presence_read'>

export interface WriteOptions {
  /** Sent as Idempotency-Key; default a fresh UUID per call, the same on each of its retries. */
  idempotencyKey?: string
}

export function realtime(transport: Transport, productId: string, apiKey: string | undefined) {
  const key = { value: apiKey, option: 'realtimeKey', in: 'header' } as const
  const base = `/${encodeURIComponent(productId)}/realtime`
  const channel = (name: string) => `${base}/channels/${encodeURIComponent(name)}`
  const get = <T>(path: string, query?: Record<string, string | number | undefined>) => transport.request<T>({ method: 'GET', path, query, key })
  const write = <T>(path: string, body: unknown, options: WriteOptions = {}) =>
    transport.request<T>({ method: 'POST', path, body, key, idempotencyKey: options.idempotencyKey ?? crypto.randomUUID() })

  const archive = (name: string, query: ArchiveQuery = {}) => get<ArchivePage>(`${channel(name)}/archive`, query)

  return {
    tokens: {
      /** A gateway token for one subject, for a browser's RealtimeClient (its `getToken` asks your backend, which calls this). */
      issue: (body: TokenIssueRequest) => transport.request<TokenIssueResult>({ method: 'POST', path: `${base}/tokens/issue`, body, key }),
    },
    messages: {
      /** Publishes to one channel; retried safely (the Idempotency-Key makes a repeat answer the first publish). */
      publish: (body: PublishRequest, options?: WriteOptions) => write<Publication>(`${base}/messages`, body, options),
      /** One payload to up to 100 channels, each answered with its own status. */
      broadcast: (body: BroadcastRequest, options?: WriteOptions) => write<BroadcastResult>(`${base}/messages/broadcast`, body, options),
    },
    channels: {
      /** Whether anyone is on the channel and where its stream is. */
      get: (name: string) => get<ChannelStatus>(channel(name)),
      /** A window (`last_n`, `last_ms`) or what follows a cursor (`offset` + `epoch`); `recovered: false` means resync. */
      history: (name: string, query: HistoryQuery = {}) => get<HistoryResult>(`${channel(name)}/history`, query),
      presence: (name: string) => get<Presence>(`${channel(name)}/presence`),
      /** One archive page; pass its `next` as `cursor` for the following one. */
      archive,
      /**
       * Every archive page in turn, as an async iterator: each item a Result; an error is the last item.
       * @example for await (const { data, error } of platform.realtime.channels.archivePages('chat:1')) { ... }
       */
      async *archivePages(name: string, query: ArchiveQuery = {}): AsyncGenerator<Result<ArchivePage>, void, undefined> {
        let cursor = query.cursor
        for (;;) {
          const page = await archive(name, { ...query, cursor })
          yield page
          if (page.error || page.data.next === null) return
          cursor = page.data.next
        }
      },
    },
  }
}
