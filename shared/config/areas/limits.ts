// What one credential, organization or product may do on the platform API: request rates and item ceilings.
import { area, integer } from '../variable'

const perMinute = (name: string, fallback: number, description: string) =>
  integer(name, { default: fallback, min: 1, max: 10_000_000, description })
const ceiling = (name: string, fallback: number, description: string) =>
  integer(name, { default: fallback, min: 1, max: 1_000_000, description })

export const limits = area('Platform API limits',
  'Requests per minute by operation class (`services/api/limits.ts`), per credential and per organization; beyond either: `429 rate_limited`. Items one product holds (`shared/db/ceiling.ts`); a create beyond: `409 limit_reached`.', {
    authRequestsPerMinute: perMinute('AUTH_RATE_LIMIT', 20, 'Sign-ups and logins per client IP per minute (each costs an argon2id hash).'),
    credentialRead: perMinute('PLATFORM_RATE_READS_PER_MINUTE', 1200, 'Reads per minute per credential (a platform key, or a user\'s sessions together).'),
    credentialWrite: perMinute('PLATFORM_RATE_WRITES_PER_MINUTE', 600, 'Writes per minute per credential.'),
    credentialExpensive: perMinute('PLATFORM_RATE_EXPENSIVE_PER_MINUTE', 30, 'Expensive operations per minute per credential.'),
    credentialAnalytics: perMinute('PLATFORM_RATE_ANALYTICS_PER_MINUTE', 120, 'Analytics runs per minute per credential.'),
    organizationRead: perMinute('PLATFORM_ORG_RATE_READS_PER_MINUTE', 3000, 'Reads per minute per organization (every credential on its products together).'),
    organizationWrite: perMinute('PLATFORM_ORG_RATE_WRITES_PER_MINUTE', 1200, 'Writes per minute per organization.'),
    organizationExpensive: perMinute('PLATFORM_ORG_RATE_EXPENSIVE_PER_MINUTE', 60, 'Expensive operations per minute per organization.'),
    organizationAnalytics: perMinute('PLATFORM_ORG_RATE_ANALYTICS_PER_MINUTE', 300, 'Analytics runs per minute per organization.'),
    mailDomains: ceiling('PRODUCT_MAX_MAIL_DOMAINS', 50, 'Mail domains one product holds.'),
    mailTemplates: ceiling('PRODUCT_MAX_MAIL_TEMPLATES', 1000, 'Mail templates one product holds.'),
    mailKeys: ceiling('PRODUCT_MAX_MAIL_KEYS', 100, 'Mail sending keys one product holds.'),
    publicKeys: ceiling('PRODUCT_MAX_PUBLIC_KEYS', 100, 'Realtime API keys (`rtk_`) one product holds.'),
    captureKeys: ceiling('PRODUCT_MAX_CAPTURE_KEYS', 100, 'Publishable capture keys one product holds.'),
    platformKeys: ceiling('PRODUCT_MAX_PLATFORM_KEYS', 100, 'Platform keys one product holds.'),
    namespaces: ceiling('PRODUCT_MAX_NAMESPACES', 200, 'Realtime namespaces one product holds.'),
    grants: ceiling('PRODUCT_MAX_GRANTS', 1000, 'Grants one product holds.'),
    dashboards: ceiling('PRODUCT_MAX_DASHBOARDS', 500, 'Analytics dashboards one product holds.'),
    insights: ceiling('PRODUCT_MAX_INSIGHTS', 2000, 'Analytics insights one product holds.'),
    webhookEndpoints: ceiling('PRODUCT_MAX_WEBHOOK_ENDPOINTS', 20, 'Webhook endpoints one product holds in one area (Realtime, Mail): each area counts its own.'),
    organizationProducts: ceiling('ORGANIZATION_MAX_PRODUCTS', 100, 'Products one organization holds (each has its own ceilings).'),
    keysCreatedPerDay: ceiling('PRODUCT_MAX_KEYS_CREATED_PER_DAY', 1000, 'Keys of each kind one product may create in 24 hours, revoked ones included (bounds create-and-revoke churn); beyond: 429.'),
  })
