// The breaker in front of one Redis server's commands (docs/architecture.md, "Outages"): a command is refused at once
// while the server's breaker is open; each outcome is judged against it (a timeout or a lost connection opens it, any
// answer closes it), and a connection that leaves several commands in a row unanswered is replaced. One Redis has one
// such guard (guardCommands); a cluster one per node (shared/redis/cluster-guard.ts).
import { Cluster, type Redis } from 'ioredis'
import { countBackendError, redisErrorKind } from '../backend-errors'
import type { Breaker } from '../breaker'
import { backendUnreachable } from '../errors'
import { log } from '../log'
import { interceptCommands, type PendingCommand, replaceSettlers } from './ioredis-internals'

/** One Redis server as the guard sees it: its breaker, and how many commands in a row it left unanswered. */
export interface ServerHealth {
  breaker: Breaker
  timeoutsInARow: number
  /** The connection to replace when the server answers nothing on it. */
  connection: Redis | Cluster
  /** A cluster node whose connection has been up at least once: a new connection to it refuses commands until up. */
  upOnce?: boolean
}

/** A command refused by a breaker: the same words as a dead link, so every caller maps it alike (503). */
export class Refused extends Error {
  constructor() {
    super('Connection is closed.')
  }
}

/**
 * Gates every command `client` sends (interceptCommands: pipelines too): a command is refused at once while
 * `health.breaker` is open. A pipeline (MULTI included) is admitted or refused as a whole, on its first command:
 * refusing only part of one would leave a MULTI open on the connection and wreck every command after it. An ASKING
 * (ioredis' cluster client sends it, never awaited, right before the command an ASK redirect sends on) is admitted or
 * refused with that command, so an open breaker's probe is not spent on it alone; whatever becomes of it (refused,
 * timed out, its connection lost) is the command's to report, never an unhandled rejection.
 * `sent(command)` is told of every command that passes.
 */
export function admitCommands(client: Redis | Cluster, health: ServerHealth, sent: (command: PendingCommand) => void): void {
  const pipelines = new WeakMap<object, boolean>() // pipeline writer → admitted
  const admit = (stream: object | undefined) => {
    if (!stream) return health.breaker.tryPass()
    let admitted = pipelines.get(stream)
    if (admitted === undefined) pipelines.set(stream, (admitted = health.breaker.tryPass()))
    return admitted
  }
  let askingAdmitted: boolean | undefined // the verdict on an ASKING, for the command sent right after it
  interceptCommands(client, (command, stream, sendOn) => {
    // Its caller has the answer already (it timed out, perhaps while queued or waiting for a retry): writing it now
    // would run a command its caller was told had failed.
    if (command.isSettled) return command.promise
    const asking = !stream && command.name === 'asking'
    if (asking) command.promise.catch(() => {})
    // Only while ready: the handshake of a reconnect (CLIENT SETNAME, SELECT, the ready check) must pass, or the breaker
    // would keep the connection from ever coming back. While not ready, ioredis refuses user commands at once itself.
    if (client.status === 'ready') {
      const admitted = askingAdmitted ?? admit(stream)
      askingAdmitted = asking ? admitted : undefined
      if (!admitted) {
        command.reject(new Refused())
        return command.promise
      }
    }
    sent(command)
    return sendOn()
  })
}

/** What one command's outcome says about the server that answered it (or did not). */
export function judge(health: ServerHealth, error?: Error): void {
  if (!error) {
    health.timeoutsInARow = 0
    health.breaker.succeeded()
    return
  }
  const kind = redisErrorKind(error, backendUnreachable(error))
  if (kind) countBackendError('redis', kind)
  if (!/timed out/i.test(error.message)) {
    health.timeoutsInARow = 0
    // An error reply is an answer: it closes the breaker as a success would. (Else a probe answered NOSCRIPT by a
    // restarted Redis would leave it open for good: the EVAL that loads the script is refused, and so on each probe.)
    if (!backendUnreachable(error)) health.breaker.succeeded()
  } else if (++health.timeoutsInARow >= DEAD_AFTER_TIMEOUTS && health.connection.status === 'ready') {
    // Nothing has come back for several timeouts in a row: the connection may have died without a reset (no RST
    // ever arrives on a dead path), and it would time out forever. A new one costs little and heals that.
    health.timeoutsInARow = 0
    log('warn', 'redis answers nothing on this connection; reconnecting', { connection: nameOf(health.connection) })
    health.connection.disconnect(true)
  }
  if (backendUnreachable(error)) health.breaker.failed()
}

/** A command whose outcome the guard judges: ioredis' own settlers kept, the guard's in their place. */
type Judged = PendingCommand & { health: ServerHealth; settled: Pick<PendingCommand, 'resolve' | 'reject'>; judged?: true }

// Called by ioredis as the command's methods (`this` is the command): one pair for every command, where a pair of
// closures and a promise reaction per command cost a public worker about 1 % of its CPU per publish. Only the first
// outcome is judged, the one its caller gets: a reply that comes after the command timed out is not; a reply ioredis
// cannot transform (rejected inside resolve) is judged as that failure.
function resolveJudged(this: Judged, value: unknown): unknown {
  const settled = this.settled.resolve(value)
  if (this.judged === undefined) {
    this.judged = true
    judge(this.health)
  }
  return settled
}
function rejectJudged(this: Judged, error: Error): unknown {
  if (this.judged === undefined) {
    this.judged = true
    judge(this.health, error)
  }
  return this.settled.reject(error)
}

/** One Redis: every command goes through one breaker. */
export function guardCommands(client: Redis, breaker: Breaker): void {
  const health: ServerHealth = { breaker, timeoutsInARow: 0, connection: client }
  admitCommands(client, health, (command) => {
    // ioredis passes a command through sendCommand again when it flushes its offline queue: judge each outcome once.
    const judged = command as Judged
    if (judged.health !== undefined) return
    judged.health = health
    judged.settled = { resolve: command.resolve, reject: command.reject }
    replaceSettlers(command, { resolve: resolveJudged, reject: rejectJudged })
  })
}

/** Command timeouts in a row, with no reply in between, after which the command connection is replaced. */
const DEAD_AFTER_TIMEOUTS = 3

const nameOf = (client: Redis | Cluster) => (client instanceof Cluster ? client.options.redisOptions?.connectionName : client.options.connectionName)
