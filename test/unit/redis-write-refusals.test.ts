// A Redis that cannot take writes now says so in an error reply; under Sentinel that is a failover in progress, and the
// caller hears 503 with Retry-After (try again), as for a lost connection, never a 500.
import { expect, test } from 'bun:test'
import { ReplyError } from 'ioredis'
import { backendUnreachable, toErrorResponse } from '../../shared/errors'

test('READONLY (a demoted master) and NOREPLICAS (a master that lost its replicas) answer 503; other error replies stay errors', async () => {
  for (const message of [
    "READONLY You can't write against a read only replica.",
    "READONLY You can't write against a read only replica. script: 70eba1abb3243ad655ab79da11eedd7fe1dc4702, on @user_script:1.",
    'NOREPLICAS Not enough good replicas to write.',
  ]) {
    const error = new ReplyError(message)
    expect(backendUnreachable(error)).toBe(true)
    const response = toErrorResponse(error)
    expect({ status: response.status, retryAfter: response.headers.get('retry-after') }).toEqual({ status: 503, retryAfter: '1' })
  }
  for (const message of ['ERR wrong number of arguments', 'WRONGTYPE Operation against a key holding the wrong kind of value', 'READONLYISH nothing']) {
    expect(backendUnreachable(new ReplyError(message))).toBe(false)
  }
})
