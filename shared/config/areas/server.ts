// The processes' addresses and the HTTP behaviour every one of them shares.
import { area, flag, integer, list, port, text, url } from '../variable'


export const server = area('Processes and HTTP',
  'Where each process listens and how clients reach it, and what every HTTP process does alike.', {
    environment: text('PLATFORM_ENV', {
      default: 'development',
      description: 'Environment name: part of every product API key\'s hashed lookup (keys do not cross environments); development-only switches run only in `development`, `dev`, `test` or `local`.',
    }),
    apiPort: port('API_PORT', 4100, 'The platform API (`services/api`) listens here.'),
    publicPort: port('PUBLIC_PORT', 4200, 'The public routes (`services/public`: Realtime publish, Mail sending, capture) listen here.'),
    gatewayPort: port('GATEWAY_PORT', 4300, 'The Realtime WebSocket gateway listens here.'),
    mailerPort: port('MAILER_PORT', 4400, 'Health endpoints of the mailers (reusePort: any mailer answers).'),
    webhooksPort: port('WEBHOOKS_PORT', 4500, 'Health endpoints of the webhooks processes (reusePort: any answers).'),
    apiUrl: url('API_URL', {
      default: { value: (get) => `http://127.0.0.1:${get('API_PORT')}`, shown: 'http://127.0.0.1:<API_PORT>' },
      schemes: ['http', 'https'],
      description: 'The platform API as clients see it (behind a proxy this differs from the listening port).',
    }),
    publicUrl: url('PUBLIC_URL', {
      default: { value: (get) => `http://127.0.0.1:${get('PUBLIC_PORT')}`, shown: 'http://127.0.0.1:<PUBLIC_PORT>' },
      schemes: ['http', 'https'],
      description: 'The public routes as clients see them.',
    }),
    gatewayUrl: url('GATEWAY_URL', {
      default: { value: (get) => `ws://127.0.0.1:${get('GATEWAY_PORT')}/connection/websocket`, shown: 'ws://127.0.0.1:<GATEWAY_PORT>/connection/websocket' },
      schemes: ['ws', 'wss'],
      description: 'The gateway\'s WebSocket endpoint as clients see it.',
    }),
    developerDomain: text('DEVELOPER_DOMAIN', {
      default: 'localhost',
      form: [/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/i, 'a domain name (letters, digits, dots and hyphens)'],
      description: 'Browser origins on the public routes must be `https://*.<DEVELOPER_DOMAIN>`.',
    }),
    extraAllowedOrigins: list('PUBLIC_EXTRA_ORIGINS', {
      item: [/^https?:\/\/[^/\s]+$/i, 'an origin such as http://localhost:5173'],
      description: 'Extra allowed browser origins on the public routes, exact origins.',
    }),
    trustProxy: flag('TRUST_PROXY', {
      default: false,
      description: 'Take the client IP from the last `X-Forwarded-For` address (only behind a proxy that sets it).',
    }),
    apiBodyLimit: integer('API_BODY_LIMIT', {
      default: 1_048_576, min: 1024, max: 67_108_864,
      description: 'Largest request body on the platform API, in bytes.',
    }),
    sessionTtlSeconds: integer('SESSION_TTL_SECONDS', {
      default: 30 * 24 * 3600, min: 60, max: 365 * 24 * 3600,
      description: 'How long a login session lasts, in seconds.',
    }),
    logRequests: flag('LOG_REQUESTS', { default: true, description: 'Log one line per HTTP request.' }),
    developmentErrors: flag('DEVELOPMENT_ERRORS', {
      default: false,
      description: 'Show the runtime\'s own error pages (stack, source lines). Never in production: they disclose paths and code.',
    }),
  })
