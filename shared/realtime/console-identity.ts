// The console's identity on the gateway: the subject of the tokens the platform API issues for its own callers
// (services/api/realtime/console-tokens.ts), which the gateway recognizes to end them and to keep them watching only.

/**
 * The token subject of a console caller: `console:<userId>` for a login session, `console:<platformKeyId>` for a
 * platform key. The colon is outside the public subject grammar ([a-zA-Z0-9._-]), so no product backend can issue it.
 */
export const consoleSubject = (callerId: string) => `console:${callerId}`

/** True for the claims' `sub` of a console token (`ext:console:...`, as rosters would show it). */
export const isConsoleIdentity = (sub: string) => sub.startsWith('ext:console:')
