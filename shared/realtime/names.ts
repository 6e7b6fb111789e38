// The spec's name grammars for Realtime: channels, namespaces, token subjects, grant patterns and operations.
import Type from 'typebox'

export const CHANNEL_PATTERN = '^[a-zA-Z0-9._-]{1,64}:[a-zA-Z0-9._:-]*$'
export const NAMESPACE_PATTERN = '^[a-zA-Z0-9._-]{1,64}$'
export const SUBJECT_PATTERN = '^[a-zA-Z0-9._-]{1,128}$'
/** A concrete namespace segment, then 1 to 7 more segments, each concrete or `*` (exactly one segment). */
export const GRANT_PATTERN = '^[a-zA-Z0-9._-]{1,64}(:([a-zA-Z0-9._-]+|\\*)){1,7}$'

export const OPS = ['subscribe', 'publish', 'presence', 'history'] as const
export type Op = (typeof OPS)[number]

/** `namespace:rest`, 3 to 128 characters of [a-zA-Z0-9._:-], with a namespace segment. */
export const ChannelName = Type.String({ minLength: 3, maxLength: 128, pattern: CHANNEL_PATTERN, description: 'namespace:rest, 3 to 128 characters of [a-zA-Z0-9._:-]' })
export const NamespaceName = Type.String({ minLength: 1, maxLength: 64, pattern: NAMESPACE_PATTERN, description: '1 to 64 characters of [a-zA-Z0-9._-]' })
export const Subject = Type.String({ minLength: 1, maxLength: 128, pattern: SUBJECT_PATTERN, description: '1 to 128 characters of [a-zA-Z0-9._-]' })
export const GrantPattern = Type.String({ maxLength: 128 + 16, pattern: GRANT_PATTERN, description: 'namespace then up to 7 segments separated by ":"; a segment may be "*" (exactly one segment)' })
export const OpName = Type.Unsafe<Op>(Type.Union(OPS.map((op) => Type.Literal(op))))

export function isChannelName(name: string): boolean {
  return name.length >= 3 && name.length <= 128 && new RegExp(CHANNEL_PATTERN).test(name)
}

/** The namespace of a valid channel name: everything before the first colon. */
export const namespaceOf = (channel: string) => channel.slice(0, channel.indexOf(':'))

/** `*` matches exactly one segment; segment counts must be equal. */
export function grantMatches(pattern: string, channel: string): boolean {
  const want = pattern.split(':')
  const have = channel.split(':')
  return want.length === have.length && want.every((segment, i) => segment === '*' || segment === have[i])
}
