// The Realtime public routes' own failures, all in the platform's one error shape (shared/errors.ts).
import { config } from '../../../shared/config'
import { ApiError } from '../../../shared/errors'

/**
 * 401 for a key that is missing, malformed, unknown or revoked. Unknown and revoked share one hint, so the body never
 * tells an attacker whether a key ever existed. `gatewayUrl` names the environment actually reached, which is the usual
 * cause of a valid-looking key being unknown (keys are per environment).
 */
export const invalidApiKey = (hint: string) =>
  new ApiError('invalid_api_key', 'invalid_api_key', { hint, gatewayUrl: config.gatewayUrl })

export const HINTS = {
  missing: 'Send the product API key (rtk_...) in the X-Api-Key header.',
  elsewhere: 'Send the product API key in the X-Api-Key header; keys in the URL (api_key) or in Authorization are not accepted.',
  malformed: 'A product API key is "rtk_" followed by 43 URL-safe base64 characters; send it unchanged in the X-Api-Key header.',
  unknown: 'This key is not active in this environment: it may be revoked, or created in another environment. '
    + 'Create a key with organization_public-keys_create for the environment whose gatewayUrl is shown here.',
} as const

export const insufficientScope = (scope: string) =>
  new ApiError('insufficient_scope', `This API key's scope does not include ${scope}`, { requiredScope: scope })

/** The path's product is not the key's: 404, never 403, so a key cannot probe other products. */
export const productNotFound = () => new ApiError('not_found', 'Product not found')
