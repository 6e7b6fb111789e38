// Mail: domain checks, sending rates and the mailers that hand emails to SMTP.
import { LOCAL_PORTS } from '../local-ports'
import { area, flag, integer, list, text, url } from '../variable'
import { DNS_SERVER } from './webhooks'

const DNS_LABEL: [RegExp, string] = [/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/i, 'a DNS label (letters, digits and hyphens)']
const DOMAIN: [RegExp, string] = [/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/i, 'a domain name (letters, digits, dots and hyphens)']

export const mail = area('Mail', 'Domain checks, sending, and the mailers\' queue and SMTP hand-off. [Mail](mail.md).', {
  devVerify: flag('MAIL_DEV_VERIFY', {
    default: false,
    description: 'Mark a registered domain verified without looking up DNS. Development and tests only: refused unless `PLATFORM_ENV` is a development one.',
  }),
  dnsServers: list('MAIL_DNS_SERVERS', { item: DNS_SERVER, description: 'DNS servers for domain checks; empty: the system\'s resolvers.' }),
  dnsTimeoutMs: integer('MAIL_DNS_TIMEOUT_MS', {
    default: 5000, min: 100, max: 60_000,
    description: 'How long one DNS lookup of a domain check may take before its record counts as not found, in ms.',
  }),
  dkimSelector: text('MAIL_DKIM_SELECTOR', {
    default: 'platform', form: DNS_LABEL,
    description: 'The DKIM selector of new domains: the record is `<selector>._domainkey.<domain>`.',
  }),
  spfInclude: text('MAIL_SPF_INCLUDE', {
    default: 'spf.mail.localhost', form: DOMAIN,
    description: 'The SPF include of the record a domain publishes (`v=spf1 include:<this> ~all`).',
  }),
  smtpUrl: url('SMTP_URL', {
    default: `smtp://127.0.0.1:${LOCAL_PORTS.smtp}`, schemes: ['smtp', 'smtps'],
    description: 'Where the mailer hands every email: `smtp://[user:pass@]host:port` (STARTTLS when offered) or `smtps://` (TLS from the first byte).',
  }),
  sendRatePerSecond: integer('MAIL_SEND_RATE_PER_SECOND', {
    default: 10, min: 1, max: 1_000_000,
    description: 'Emails a product may queue per second (`POST /emails`); beyond it 429 with Retry-After.',
  }),
  maxAttempts: integer('MAIL_MAX_ATTEMPTS', { default: 8, min: 1, max: 100, description: 'Delivery attempts before an email that keeps failing temporarily is `failed`.' }),
  retryBaseMs: integer('MAIL_RETRY_BASE_MS', {
    default: 30_000, min: 100, max: 3_600_000,
    description: 'The wait after the first temporary failure, in ms; it doubles after each, up to `MAIL_RETRY_MAX_MS`.',
  }),
  retryMaxMs: integer('MAIL_RETRY_MAX_MS', { default: 3_600_000, min: 1000, max: 86_400_000, description: 'The longest wait between two attempts, in ms.' }),
  leaseMs: integer('MAIL_LEASE_MS', {
    default: 60_000, min: 1000, max: 3_600_000,
    description: 'How long a mailer holds a claimed email, in ms; past it another mailer may take it over.',
  }),
  pollMs: integer('MAILER_POLL_MS', { default: 250, min: 10, max: 60_000, description: 'How often an idle mailer looks for due emails, in ms.' }),
  batchSize: integer('MAILER_BATCH', { default: 10, min: 1, max: 1000, description: 'How many due emails a mailer claims at once.' }),
  smtpTimeoutMs: integer('MAILER_SMTP_TIMEOUT_MS', {
    default: 30_000, min: 100, max: 600_000,
    description: 'Longest one SMTP conversation may take (connect, greeting, each reply), in ms.',
  }),
  maxHeaders: integer('MAIL_MAX_HEADERS', {
    default: 50, min: 0, max: 1000,
    description: 'Most custom headers one email may carry; more is a 400 naming `/body/headers`.',
  }),
  maxListedErrors: integer('MAIL_MAX_LISTED_ERRORS', {
    default: 20, min: 1, max: 1000,
    description: 'Most failing fields a 400 of `POST /emails` lists (its message says how many more): bounds the reply\'s size.',
  }),
})
