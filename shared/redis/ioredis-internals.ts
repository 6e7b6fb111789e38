// Every reliance of the platform on ioredis beyond its documented API, in this one module, each checked against the
// installed release by test/platform/ioredis-internals.test.ts, so an upgrade that changes one fails there rather than
// in an outage. Written against ioredis 6.0.0. What is relied on:
// - every command, a pipeline's and a MULTI's included, and a command held in the offline queue again when the queue is
//   flushed, passes through the connection's `sendCommand(command, stream?, node?)` as looked up on the instance at each
//   call, so replacing it on the instance sees them all; a pipeline's (and a MULTI's) commands share one `stream`
//   argument, a lone command has none;
// - a command's `resolve` and `reject` are read when its reply comes (replaced, they see the outcome first), its
//   `isSettled` is true once its caller has the answer (a reply, an error, a timeout), and `setTimeout(ms)` arms the
//   command timeout (once);
// - `options.enableOfflineQueue` is read at every command: turned off after the first connection, a command sent while
//   the connection is down fails at once (a getter on a cluster client's options is read the same way);
// - `options.host` and `options.port` are read at every (re)connection;
// - the private `offlineQueue` holds the commands waiting for a connection (its `length` is read, never changed);
// - after 'connect' a connection's socket is its `stream`, and commands are written to it with `stream.write`;
// - every command and batch is traced through the `diagnostics_channel` tracing channels `ioredis:command` and
//   `ioredis:batch` unless the channel's `hasSubscribers` is `false` (`undefined` counts as subscribed);
// - `Command.checkFlag(flag, name)` answers from the fixed `Command.FLAGS` lists, the same for the same arguments, and
//   is looked up on `Command` at each call;
// - the private `commandQueue` (commands written, waiting for their replies, oldest first) and `offlineQueue` are
//   denque queues read with `length` and `peekAt(i)`, each item holding its `command`; both may be replaced by new
//   queues (a reconnection), so they are looked up at each use, and the command queue in use when a connection emits
//   'close' is the one the next connection replaces, keeping commands nothing answers any more (unless
//   `autoResendUnfulfilledCommands` sends them again); a command rejected while it waits keeps its place, and its
//   reply, when it comes, is dropped (its promise is settled already), as with ioredis' own command timeout.
import diagnostics from 'node:diagnostics_channel'
import { Command, type Cluster, type Redis } from 'ioredis'
import { describeError, log } from '../log'

/** A command on its way, as ioredis' Command shows it: only the members relied on. */
export interface PendingCommand {
  name: string
  promise: Promise<unknown>
  resolve(value: unknown): unknown
  reject(error: Error): unknown
  /** Set by ioredis once its caller has the answer (a reply, a final error, a timeout). */
  isSettled?: boolean
  /** Arms ioredis' command timeout (once: a second call keeps the first timer). */
  setTimeout(ms: number): void
}

type SendCommand = (command: PendingCommand, stream?: object, ...rest: unknown[]) => unknown

/**
 * Puts `intercept` in front of every command `client` sends: it is called with the command, the pipeline it belongs to
 * (`stream`, the same object for each command of one pipeline or MULTI; undefined for a lone command) and `sendOn`,
 * which hands the command to ioredis as if nothing had intercepted it (a cluster's third argument, the node a pipeline
 * chose, is passed on untouched). What `intercept` returns is what ioredis gets back.
 * @example interceptCommands(client, (command, stream, sendOn) => (allowed() ? sendOn() : refuse(command)))
 */
export function interceptCommands(
  client: Redis | Cluster,
  intercept: (command: PendingCommand, stream: object | undefined, sendOn: () => unknown) => unknown,
): void {
  const send = client.sendCommand.bind(client) as SendCommand
  ;(client as unknown as { sendCommand: SendCommand }).sendCommand = (command, stream, ...rest) =>
    intercept(command, stream, () => send(command, stream, ...rest))
}

/** Replaces a command's resolve and reject: ioredis calls these with its outcome (a reply, a redirect, an error). */
export function replaceSettlers(command: PendingCommand, settlers: Pick<PendingCommand, 'resolve' | 'reject'>): void {
  command.resolve = settlers.resolve
  command.reject = settlers.reject
}

/** Whether a command sent while `client` is not connected waits for the connection (on) or fails at once (off). */
export function setOfflineQueue(client: Redis | Cluster, on: boolean): void {
  client.options.enableOfflineQueue = on
}

/** The same switch on a cluster client, asked anew at every command: `holds()` decides then. */
export function offlineQueueWhile(cluster: Cluster, holds: () => boolean): void {
  Object.defineProperty(cluster.options, 'enableOfflineQueue', { get: holds, set: () => {}, configurable: true })
}

/** Points `client`'s next reconnection at another server. */
export function retarget(client: Redis, server: { host: string; port: number }): void {
  Object.assign(client.options, server)
}

/** How many commands wait in `client`'s offline queue for a connection. */
export const offlineQueueLength = (client: Redis | Cluster): number =>
  (client as unknown as { offlineQueue?: { length: number } }).offlineQueue?.length ?? 0

/**
 * Coalesces the writes `client` makes to its socket within one turn of the event loop into one: the commands' RESP
 * (strings, or Buffers in buffer mode) are kept here and written as one chunk on setImmediate, or at once when the
 * socket is ended first (ioredis' disconnect(true): on READONLY, by the guard), so what was sent before it still goes
 * out. Relies on ioredis writing commands with `stream.write(chunk)` on the socket it exposes as `stream` after
 * 'connect', ignoring what write returns, and closing it with `end()`. (Corking the socket instead left each command to
 * the stream's own buffering, one entry and a callback per write: about a tenth of a public worker's CPU under load.)
 */
export function coalesceWrites(client: Redis): void {
  const turn = turnOf(client)
  client.on('connect', () => {
    type Socket = { write(chunk: string | Buffer): boolean; end(...args: unknown[]): unknown; destroy(error?: Error): void; destroyed: boolean; writableEnded: boolean; coalesced?: true }
    const stream = (client as unknown as { stream?: Socket }).stream
    if (!stream || stream.coalesced) return
    stream.coalesced = true
    const write = stream.write.bind(stream)
    const end = stream.end.bind(stream)
    let pending: (string | Buffer)[] = []
    let strings = true
    let scheduled = false
    const flush = () => {
      // Cleared first: a hook added while these run (or a write after them) asks for a write of its own.
      scheduled = false
      // What waits for this turn's write is sent first (beforeTurnWrite): its commands join the chunk.
      if (turn.hooks.length > 0) runHooks(turn)
      const chunks = pending
      const joinable = strings
      pending = []
      strings = true
      // A socket closed meanwhile: ioredis fails the commands it had in flight when the close is reported.
      if (chunks.length === 0 || stream.destroyed || stream.writableEnded) return
      try {
        if (chunks.length === 1) write(chunks[0]!)
        else if (joinable) write((chunks as string[]).join(''))
        else write(Buffer.concat(chunks.map((chunk) => (typeof chunk === 'string' ? Buffer.from(chunk) : chunk))))
      } catch (error) {
        // A turn's commands too large to join, or a socket that refuses them: fail them now, not at their time-out.
        stream.destroy(error instanceof Error ? error : new Error(String(error)))
      }
    }
    const schedule = () => {
      if (scheduled) return
      scheduled = true
      setImmediate(flush)
    }
    turn.schedule = schedule
    stream.write = (chunk: string | Buffer) => {
      schedule()
      if (typeof chunk !== 'string') strings = false
      pending.push(chunk)
      return true
    }
    stream.end = (...args: unknown[]) => {
      flush()
      return end(...args)
    }
  })
}

/** What waits for a client's next coalesced write (beforeTurnWrite), and how to ask for that write. */
interface Turn {
  hooks: (() => void)[]
  /** Asks the connected socket's coalesced write for this turn; undefined until a socket is coalesced. */
  schedule: (() => void) | undefined
}

const turns = new WeakMap<Redis, Turn>()

function turnOf(client: Redis): Turn {
  let turn = turns.get(client)
  if (!turn) turns.set(client, (turn = { hooks: [], schedule: undefined }))
  return turn
}

function runHooks(turn: Turn): void {
  const hooks = turn.hooks
  turn.hooks = []
  for (const hook of hooks) {
    try {
      hook()
    } catch (error) {
      // A hook settles its own callers (the publish batch rejects them); one that throws must not cost the turn's write.
      log('error', 'a hook of the coalesced write failed', describeError(error))
    }
  }
}

/**
 * Runs `hook` once, in this turn's coalesced write of `client`, just before its chunk goes out: commands the hook sends
 * join the chunk, so work gathered during the turn (the publish batch: shared/realtime/publish-batch.ts) leaves in the
 * same write as if each part had sent its own command, not one turn later. On a client without coalesced writes (a
 * cluster's), or before its first connection, the hook runs on setImmediate.
 */
export function beforeTurnWrite(client: Redis | Cluster, hook: () => void): void {
  const turn = turns.get(client as Redis)
  if (!turn?.schedule) {
    setImmediate(hook)
    return
  }
  turn.hooks.push(hook)
  turn.schedule()
}

/**
 * Bun's TracingChannel has no `hasSubscribers` (oven-sh/bun#27805; Node has it since 20.13), and ioredis reads
 * `undefined` as "subscribed": every command then built a trace context (its arguments sanitized through a list of
 * regular expressions) and a wrapper promise for nobody, 10-15 % of a public worker's CPU per token issue. Defines the
 * getter as Node does (any of the five channels subscribed) where the runtime lacks it; a runtime that has it keeps
 * its own.
 */
export function traceOnlyWhenSubscribed(): void {
  const prototype = Object.getPrototypeOf(diagnostics.tracingChannel('platform:probe')) as object
  if ('hasSubscribers' in prototype) return
  type Channels = Record<'start' | 'end' | 'asyncStart' | 'asyncEnd' | 'error', { hasSubscribers: boolean }>
  Object.defineProperty(prototype, 'hasSubscribers', {
    configurable: true,
    get(this: Channels) {
      return this.start.hasSubscribers || this.end.hasSubscribers || this.asyncStart.hasSubscribers
        || this.asyncEnd.hasSubscribers || this.error.hasSubscribers
    },
  })
}

/**
 * ioredis asks `Command.checkFlag` six to eight times per command (timeouts, blocking, subscriber mode, disconnect),
 * each lower-casing the name and looking it up in a map: about 2 % of a public worker's CPU under publish load. The
 * answer depends only on the flag and the name, so it is remembered (the names are the platform's own commands, a few
 * dozen; past 1 000 distinct pairs nothing more is kept).
 */
export function rememberCommandFlags(): void {
  type CheckFlag = (flag: string, name: string) => boolean
  const commands = Command as unknown as { checkFlag: CheckFlag & { remembered?: true } }
  if (commands.checkFlag.remembered) return
  const check = commands.checkFlag.bind(Command)
  const known = new Map<string, Map<string, boolean>>() // flag → name → answer
  let pairs = 0
  const remembered = (flag: string, name: string) => {
    let names = known.get(flag)
    if (!names) known.set(flag, (names = new Map()))
    let has = names.get(name)
    if (has === undefined) {
      has = check(flag, name)
      if (pairs < 1000) {
        names.set(name, has)
        pairs++
      }
    }
    return has
  }
  commands.checkFlag = Object.assign(remembered, { remembered: true as const })
}

/** A command as the deadline sweep sees it: first seen waiting at `firstSeenWaiting` (ms, performance.now()). */
type Watched = PendingCommand & { firstSeenWaiting?: number }
type CommandQueue = { length: number; peekAt(index: number): { command: Watched } | undefined }

/** What ioredis' own command timeout rejects with (guard.ts and the backend metrics read "timed out" in it). */
const TIMED_OUT = 'Command timed out'

/**
 * Gives each command `client` sends `ms` for its reply, then rejects it with "Command timed out" as ioredis'
 * `commandTimeout` does, without a timer per command (arming and clearing one was about 2 % of a public worker's CPU
 * per publish): a sweep every `ms / 8` stamps the commands that have started waiting since the last sweep and rejects
 * those first seen waiting `ms` or more ago, so a command times out at least `ms` after it was sent and, the timer
 * running a little early or late, about a quarter later at most. A command answered before the next sweep is never
 * touched. The queues are in the order commands were sent, so a sweep reads the new ones from the back and the expired
 * ones from the front. A reconnection gives the client a new command queue and leaves the commands of the old one
 * unanswered (with `autoResendUnfulfilledCommands` off, as the command connection has it): the queue is taken when its
 * connection closes and swept whole until every command in it has its answer, as each command's own timer would have;
 * when the client ends, those still waiting are rejected as ioredis rejects its own queues' ("Connection is closed.").
 * The client must be made without `commandTimeout`. Returns the sweep's stop (also stopped when the client ends).
 */
export function timeOutCommands(client: Redis, ms: number): () => void {
  const internals = client as unknown as { commandQueue: CommandQueue; offlineQueue: CommandQueue }
  const expired = (command: Watched, now: number) => {
    // Unstamped ahead of a stamped one (never so in ioredis' order of sending): it starts waiting now.
    if (command.firstSeenWaiting === undefined) command.firstSeenWaiting = now
    return now - command.firstSeenWaiting >= ms
  }
  const sweep = (queue: CommandQueue, now: number) => {
    // New since the last sweep: every command behind the last one stamped.
    for (let i = queue.length - 1; i >= 0; i--) {
      const command = queue.peekAt(i)!.command
      if (command.firstSeenWaiting !== undefined) break
      command.firstSeenWaiting = now
    }
    // Expired: the oldest, up to the first that is not (one rejected before stays until its reply or the close).
    for (let i = 0; i < queue.length; i++) {
      const command = queue.peekAt(i)!.command
      if (!expired(command, now)) break
      if (!command.isSettled) command.reject(new Error(TIMED_OUT))
    }
  }
  // A queue its connection closed under: nothing is added to it or taken from it once ioredis replaces it on the next
  // connection. Whether any command in it still waits.
  const sweepLeft = (queue: CommandQueue, now: number) => {
    let waiting = false
    for (let i = 0; i < queue.length; i++) {
      const command = queue.peekAt(i)!.command
      if (command.isSettled) continue
      if (expired(command, now)) command.reject(new Error(TIMED_OUT))
      else waiting = true
    }
    return waiting
  }
  // Taken at the close, before the next connection replaces it (however soon: several may come between two sweeps).
  let left: CommandQueue[] = []
  client.on('close', () => {
    const queue = internals.commandQueue
    if (queue.length > 0 && !left.includes(queue)) left.push(queue)
  })
  const timer = setInterval(() => {
    const now = performance.now()
    sweep(internals.offlineQueue, now)
    sweep(internals.commandQueue, now)
    if (left.length > 0) left = left.filter((queue) => sweepLeft(queue, now))
  }, Math.max(1, Math.floor(ms / 8)))
  timer.unref()
  const stop = () => clearInterval(timer)
  client.once('end', () => {
    stop()
    // Ended for good: what still waits in a queue a reconnection left hears what ioredis tells its own queues' commands.
    for (const queue of left) {
      for (let i = 0; i < queue.length; i++) {
        const command = queue.peekAt(i)!.command
        if (!command.isSettled) command.reject(new Error('Connection is closed.'))
      }
    }
    left = []
  })
  return stop
}
