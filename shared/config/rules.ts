// Rules across variables: settings each valid alone that are never safe together, refused when any process starts.

/**
 * The environments a development-only switch may run in, compared trimmed and in lower case. An allow-list, not a
 * deny-list: PLATFORM_ENV is a free name (product keys are scoped to it), and `Production`, ` production`, `prod` or
 * `staging` are all deployments where tenants must not get what these switches give.
 */
export const DEVELOPMENT_ENVIRONMENTS = ['development', 'dev', 'test', 'local']

/** Why development-only switch `variable` may not be on in `environment` (`risk`: what a product could then do). */
function developmentOnlyRefusal(variable: string, environment: string, on: boolean, risk: string): string | undefined {
  if (!on || DEVELOPMENT_ENVIRONMENTS.includes(environment.trim().toLowerCase())) return undefined
  return `${variable} is refused when PLATFORM_ENV=${JSON.stringify(environment)}: it is allowed only when PLATFORM_ENV is ` +
    `${DEVELOPMENT_ENVIRONMENTS.join(', ')} (any case), since ${risk}. Unset ${variable} (or set it to 0).`
}

/** Why MAIL_DEV_VERIFY may not be on in `environment`, or undefined when it may (or is off). */
export const devVerifyRefusal = (environment: string, devVerify: boolean) => developmentOnlyRefusal('MAIL_DEV_VERIFY', environment,
  devVerify, 'it marks Mail domains verified without DNS and a product could then send as any domain')

/** Why WEBHOOK_ALLOW_PRIVATE_URLS may not be on in `environment`, or undefined when it may (or is off). */
export const privateWebhooksRefusal = (environment: string, allow: boolean) => developmentOnlyRefusal('WEBHOOK_ALLOW_PRIVATE_URLS',
  environment, allow, 'a product could then point webhooks at plain http and at loopback and private addresses, the platform\'s own network')

/** Why the webhook lease is too short for its attempts: a second process would make an attempt the first still waits on. */
export function webhookLeaseRefusal(leaseMs: number, timeoutMs: number): string | undefined {
  if (leaseMs >= timeoutMs + 1000) return undefined
  return `WEBHOOK_LEASE_MS (${leaseMs}) must exceed WEBHOOK_TIMEOUT_MS (${timeoutMs}) by at least 1000`
}

/** Whether `host` is a loopback address (or name): a listener only this machine reaches. */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[|\]$/g, '')
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h) || /^::ffff:127\./.test(h)
}

/**
 * Why a metrics listener on `host` needs a token: the metrics say what the platform does and how much, so exposing
 * them beyond this machine must be a decision (METRICS_TOKEN), not a default.
 */
export function metricsHostRefusal(host: string, token: string): string | undefined {
  if (isLoopback(host) || token) return undefined
  return `METRICS_HOST ${host} is not loopback: set METRICS_TOKEN (scrapers then send it as a bearer token), or bind 127.0.0.1`
}

/** What the rules refuse in a configuration, one line each; empty when it may run. */
export function refusals(config: {
  environment: string
  mail: { devVerify: boolean }
  webhooks: { allowPrivateUrls: boolean; leaseMs: number; timeoutMs: number }
  metrics: { port: number; portOffset: number; host: string; token: string }
}): string[] {
  const metricsListener = config.metrics.port > 0 || config.metrics.portOffset > 0
  return [
    devVerifyRefusal(config.environment, config.mail.devVerify),
    privateWebhooksRefusal(config.environment, config.webhooks.allowPrivateUrls),
    webhookLeaseRefusal(config.webhooks.leaseMs, config.webhooks.timeoutMs),
    metricsListener ? metricsHostRefusal(config.metrics.host, config.metrics.token) : undefined,
  ].filter((refusal): refusal is string => refusal !== undefined)
}
