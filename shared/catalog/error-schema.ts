// The platform's one error body as JSON Schema, for both OpenAPI documents (the platform API's and the public surface's).
import { ERROR_CODES, ERRORS } from '../error-catalog'

/** JSON Schema of the platform's one error body (shared/errors.ts), its codes from the catalog (shared/error-catalog.ts). */
export const ERROR_SCHEMA = {
  type: 'object',
  required: ['error', 'message'],
  properties: {
    error: {
      type: 'string',
      enum: ERROR_CODES,
      description: 'Stable machine-readable code (docs/errors.md gives each one\'s status and meaning). Temporary, the same '
        + `request may succeed later (after Retry-After where the response has one): ${ERROR_CODES.filter((code) => ERRORS[code].temporary).join(', ')}.`,
    },
    message: { type: 'string', description: 'Human-readable explanation.' },
    fields: {
      type: 'array',
      description: 'For validation failures: each failing field as a JSON pointer into path, query or body.',
      items: {
        type: 'object',
        required: ['path', 'message'],
        properties: { path: { type: 'string' }, message: { type: 'string' } },
      },
    },
  },
  additionalProperties: true,
} as const
