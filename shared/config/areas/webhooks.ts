// Webhooks: URL rules, the retry schedule, and how the webhooks processes share out attempts.
import { hostname } from 'node:os'
import { DEFAULT_RETRY_DELAYS_MS, parseRetryDelays } from '../../webhooks/schedule'
import { area, custom, flag, integer, list, text } from '../variable'

/** An IP address, optionally with a port: what a resolver's setServers takes. */
export const DNS_SERVER: [RegExp, string] = [/^(\d{1,3}(\.\d{1,3}){3}(:\d{1,5})?|[0-9a-f:]+|\[[0-9a-f:]+\](:\d{1,5})?)$/i, 'an IP address or ip:port']


export const webhooks = area('Webhooks',
  'Webhook URLs, the retry schedule and the webhooks processes that make the attempts. [Webhooks](webhooks.md).', {
    allowPrivateUrls: flag('WEBHOOK_ALLOW_PRIVATE_URLS', {
      default: false,
      description: 'Let webhook URLs be plain http and point at loopback or private addresses. Development and tests only: refused unless `PLATFORM_ENV` is a development one.',
    }),
    dnsTimeoutMs: integer('WEBHOOK_DNS_TIMEOUT_MS', {
      default: 3000, min: 100, max: 60_000,
      description: 'Longest the resolution of a webhook URL\'s host may take at create or update, in ms; past it the URL is refused.',
    }),
    dnsServers: list('WEBHOOK_DNS_SERVERS', {
      item: DNS_SERVER,
      description: 'DNS servers webhook hosts are resolved through, at create, update and every attempt; empty: the system resolver.',
    }),
    retryDelaysMs: custom<readonly number[]>('WEBHOOK_RETRY_SCHEDULE', {
      default: DEFAULT_RETRY_DELAYS_MS, shown: '5s,5m,30m,2h,5h,10h,10h',
      rule: 'at most 20 comma-separated durations from 1ms to 24h, each with a unit (ms, s, m, h)',
      parse: parseRetryDelays,
      description: 'Delays between a delivery\'s attempts (Svix\'s and Resend\'s schedule unless set); after the last the delivery is failed.',
    }),
    timeoutMs: integer('WEBHOOK_TIMEOUT_MS', {
      default: 15_000, min: 100, max: 300_000,
      description: 'Longest one attempt may take (resolving, connecting, sending, reading the answer), in ms.',
    }),
    leaseMs: integer('WEBHOOK_LEASE_MS', {
      default: 60_000, min: 1000, max: 3_600_000,
      description: 'How long a process holds a claimed delivery, in ms; at least `WEBHOOK_TIMEOUT_MS` + 1000, or two processes could make one attempt.',
    }),
    pollMs: integer('WEBHOOK_POLL_MS', { default: 250, min: 10, max: 60_000, description: 'How often an idle webhooks process looks for due deliveries, in ms.' }),
    concurrency: integer('WEBHOOK_CONCURRENCY', { default: 64, min: 1, max: 10_000, description: 'Most attempts one webhooks process runs at once.' }),
    endpointConcurrency: integer('WEBHOOK_ENDPOINT_CONCURRENCY', {
      default: 4, min: 1, max: 1000,
      description: 'Most attempts in flight to one endpoint, across every webhooks process.',
    }),
    productConcurrency: integer('WEBHOOK_PRODUCT_CONCURRENCY', {
      default: 16, min: 1, max: 10_000,
      description: 'Most attempts in flight to one product\'s endpoints together (all areas), across every webhooks process.',
    }),
    organizationConcurrency: integer('WEBHOOK_ORGANIZATION_CONCURRENCY', {
      default: 32, min: 1, max: 10_000,
      description: 'Most attempts in flight to one organization\'s products together, across every webhooks process.',
    }),
    maxPendingPerEndpoint: integer('WEBHOOK_MAX_PENDING_PER_ENDPOINT', {
      default: 10_000, min: 100, max: 10_000_000,
      description: 'Most deliveries pending to one endpoint; past it the hourly sweep fails the oldest (listed, replayable).',
    }),
    retentionDays: integer('WEBHOOK_RETENTION_DAYS', {
      default: 30, min: 1, max: 3650,
      description: 'Days a message, its deliveries and their attempts are kept once none is pending.',
    }),
    disableAfterMs: integer('WEBHOOK_DISABLE_AFTER_MS', {
      default: 5 * 24 * 3_600_000, min: 1000, max: 30 * 24 * 3_600_000,
      description: 'An endpoint whose every attempt has failed for this long (ms) is disabled (5 days, as Svix).',
    }),
    consumer: text('WEBHOOKS_CONSUMER', {
      default: { value: () => `webhooks-${hostname()}`, shown: 'webhooks-<hostname>' },
      description: 'This process\'s consumer name in the group `webhooks` that reads the shards\' hooks streams; stable across restarts.',
    }),
  })
