// Every area's declarations, in the order docs/configuration.md lists them.
import { aggregator } from './aggregator'
import { analytics } from './analytics'
import { archiver } from './archiver'
import { caches } from './caches'
import { database } from './database'
import { gateway } from './gateway'
import { limits } from './limits'
import { mail } from './mail'
import { metrics } from './metrics'
import { realtime } from './realtime'
import { redis } from './redis'
import { secrets } from './secrets'
import { server } from './server'
import { storage } from './storage'
import { webhooks } from './webhooks'

export { aggregator, analytics, archiver, caches, database, gateway, limits, mail, metrics, realtime, redis, secrets, server, storage, webhooks }

export const AREAS = [
  server, database, redis, storage, secrets, caches, limits, metrics,
  realtime, gateway, archiver, analytics, aggregator, webhooks, mail,
] as const
