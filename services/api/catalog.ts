// Every operation of the platform REST API, in one list: REST routes, OpenAPI and MCP tools are generated from it.
import type { AnyOperation } from '../../shared/catalog/operation'
import { catalogVersion } from './openapi'
import { accountOperations } from './accounts/operations'
import { analyticsOperations } from './analytics/operations'
import { publicKeyOperations } from './public-keys/operations'
import { mailOperations } from './mail/operations'
import { realtimeOperations } from './realtime/operations'
import { trackingOperations } from './tracking/operations'
import { webhookEndpointOperations } from './webhooks/operations'

export const operations: readonly AnyOperation[] = [
  ...accountOperations, ...publicKeyOperations, ...analyticsOperations, ...mailOperations, ...realtimeOperations, ...trackingOperations,
  ...webhookEndpointOperations,
]

export const CATALOG_VERSION = catalogVersion(operations)
