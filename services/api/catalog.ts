// Every operation of the platform REST API, in one list: REST routes, OpenAPI and MCP tools are generated from it.
import type { AnyOperation } from '../../shared/catalog/operation'
import { catalogVersion } from '../../shared/catalog/openapi'
import { accountOperations } from './accounts/operations'

export const operations: readonly AnyOperation[] = [...accountOperations]

export const CATALOG_VERSION = catalogVersion(operations)
