// Realtime publishing: shards, quotas, the per-product byte budgets in Redis, payload storage and webhook events.
import { area, integer, list, text } from '../variable'

/** S3's rule for bucket names (the lower-case form every region accepts). */
const BUCKET: [RegExp, string] = [/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'an S3 bucket name (3 to 63 lower-case letters, digits, dots and hyphens)']

export const realtime = area('Realtime',
  'Publishing, history and the per-product budgets that keep one tenant from filling Redis. [Data plane](realtime-data-plane.md), [public API](realtime-public-api.md).', {
    shards: integer('REALTIME_SHARDS', {
      default: 16, min: 1, max: 1024,
      description: 'Shards (Redis Streams) channels hash onto; fixed for a deployment\'s lifetime.',
    }),
    keySetRefreshMs: integer('REALTIME_KEY_SET_REFRESH_MS', {
      default: 30_000, min: 1000, max: 30_000,
      description: 'How often a token verifier re-reads the signing key set, in ms; at most 30 s, what a new key\'s maturity assumes.',
    }),
    quotaWindowSeconds: integer('REALTIME_QUOTA_WINDOW_SECONDS', {
      default: 10, min: 1, max: 3600,
      description: 'The publish quota\'s fixed window, in seconds: a product is refused past burst + 2 x sustained x window.',
    }),
    quotaSustainedPerSecond: integer('REALTIME_QUOTA_SUSTAINED', {
      default: 50, min: 0, max: 1_000_000_000,
      description: 'Publishes per second a product sustains.',
    }),
    quotaBurst: integer('REALTIME_QUOTA_BURST', {
      default: 100, min: 0, max: 1_000_000_000,
      description: 'Publishes a product may send above its sustained rate in one window.',
    }),
    ipRequestsPerMinute: integer('PUBLIC_IP_RATE_LIMIT', {
      default: 100, min: 1, max: 1_000_000_000,
      description: 'Public-route requests per client IP per minute, counted apart from the publish quota.',
    }),
    maxDecompressedBytes: integer('REALTIME_MAX_DECOMPRESSED_BYTES', {
      default: 8 * 1024 * 1024, min: 262_144, max: 67_108_864,
      description: 'Largest decompressed body of a gzip-encoded `POST /messages`, in bytes (the 256 KiB limit counts wire bytes).',
    }),
    payloadBucket: text('REALTIME_PAYLOAD_BUCKET', {
      default: 'realtime-payloads', form: BUCKET,
      description: 'Default S3 bucket for provisioned payload storage.',
    }),
    payloadBucketsAllowed: list('REALTIME_PAYLOAD_BUCKETS', {
      item: BUCKET,
      description: 'Other buckets a product may choose; products never name arbitrary buckets (the platform\'s credentials reach them all).',
    }),
    fanoutRetentionMs: integer('REALTIME_FANOUT_RETENTION_MS', {
      default: 60_000, min: 10_000, max: 3_600_000,
      description: 'How long an entry stays in a shard\'s fan-out stream, in ms (trimmed by age only); the same on every process.',
    }),
    productFanoutMaxBytes: integer('REALTIME_PRODUCT_FANOUT_MAX_BYTES', {
      default: 32 * 1024 * 1024, min: 65_536, max: 1_073_741_824,
      description: 'Bytes one product may append to one shard\'s fan-out stream within the retention; past it 429 `fanout_budget_exceeded`.',
    }),
    productHistoryMaxBytes: integer('REALTIME_PRODUCT_HISTORY_MAX_BYTES', {
      default: 64 * 1024 * 1024, min: 16_384, max: 1_073_741_824,
      description: 'Bytes of history one product may keep on one shard; a publish past it is 429 `history_budget_exceeded`.',
    }),
    productClientEventsPerSecond: integer('REALTIME_PRODUCT_CLIENT_EVENTS_PER_SECOND', {
      default: 200, min: 1, max: 1_000_000,
      description: 'Client events one product may send per second across all its connections; beyond it `rate_limited`.',
    }),
    historyMaxReplyBytes: integer('REALTIME_HISTORY_MAX_REPLY_BYTES', {
      default: 16 * 1024 * 1024, min: 262_144, max: 134_217_728,
      description: 'Most payload bytes one history reply carries (built inside Redis, so it must stay bounded).',
    }),
    archiveMaxReplyBytes: integer('REALTIME_ARCHIVE_MAX_REPLY_BYTES', {
      default: 4 * 1024 * 1024, min: 262_144, max: 134_217_728,
      description: 'Most payload bytes one archive page carries (at least one entry).',
    }),
    usageFlushMs: integer('REALTIME_USAGE_FLUSH_MS', {
      default: 5000, min: 100, max: 600_000,
      description: 'How often public workers and gateways write the usage they counted, in ms.',
    }),
    hookGraceMs: integer('REALTIME_HOOK_GRACE_MS', {
      default: 5000, min: 0, max: 300_000, formerNames: ['WEBHOOK_PRESENCE_GRACE_MS'],
      description: 'How long a last presence entry, or a channel\'s last subscriber, stays gone before `presence.member_removed` / `channel.vacated`, in ms; the same on every process.',
    }),
    hookRetentionMs: integer('REALTIME_HOOK_RETENTION_MS', {
      default: 3_600_000, min: 60_000, max: 86_400_000,
      description: 'Longest a webhook event waits in its shard\'s hooks stream for the webhooks process, in ms.',
    }),
    productHookMaxBytes: integer('REALTIME_PRODUCT_HOOK_MAX_BYTES', {
      default: 16 * 1024 * 1024, min: 65_536, max: 1_073_741_824,
      description: 'Webhook event bytes one product may append to one shard\'s hooks stream within that retention; past it adds are dropped.',
    }),
  })
