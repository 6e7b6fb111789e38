// The master keys that seal secrets at rest (shared/secrets.ts checks their form where they are used).
import { area, secret, secretList } from '../variable'

const FORM = '32 random bytes, base64 or base64url (43 or 44 characters) or hex (64 characters)'

export const secrets = area('Secrets at rest',
  'Master keys for sealed secrets (`shared/secrets.ts`); checked by the processes that hold secrets, when they start.', {
    current: secret('PLATFORM_SECRET_KEY', {
      rule: FORM, unset: null,
      description: 'The master key that seals new secrets and opens sealed ones. `scripts/up` and `scripts/test` generate one in `.data/secret.key`.',
    }),
    previous: secretList('PLATFORM_SECRET_KEY_PREVIOUS', {
      rule: `a comma-separated list, each ${FORM}`,
      description: 'Older master keys, comma-separated, that still open (never seal) during a rotation.',
    }),
  })
