// An operation as an MCP tool: a compact description and input schema, and the tool's arguments read back into the
// {params, query, body} that invoke() validates. Compact because tools/list is read into an agent's context whole.
import type { Tool } from '@modelcontextprotocol/sdk/types.js'
import { type AnyOperation, bodyRequired } from '../../shared/catalog/operation'
import { badRequest } from '../../shared/errors'
import type { RawInput } from './invoke'

type Part = 'params' | 'query' | 'body'
type Schema = Record<string, unknown>

/** The nested form's argument names, REST's parts: `path` holds the path parameters. */
const NESTED: Record<string, Part> = { path: 'params', query: 'query', body: 'body' }

const json = (schema: unknown): Schema => JSON.parse(JSON.stringify(schema))
const propertiesOf = (schema: unknown) => ((schema as { properties?: Record<string, unknown> } | undefined)?.properties) ?? {}
const requiredOf = (schema: unknown) => ((schema as { required?: string[] } | undefined)?.required) ?? []

/**
 * Each argument name's REST part, when the tool can take its arguments flat: every field of path, query and body has a
 * name no other part uses, and none is called path, query or body (which would read as the nested form). Null otherwise:
 * the tool then takes only {path, query, body}.
 */
export function flatLayout(op: AnyOperation): Map<string, Part> | null {
  const layout = new Map<string, Part>()
  for (const part of ['params', 'query', 'body'] as const) {
    for (const name of Object.keys(propertiesOf(op[part]))) {
      if (layout.has(name) || name in NESTED) return null
      layout.set(name, part)
    }
  }
  return layout
}

/**
 * A schema without what costs bytes and tells an agent nothing it needs to call right: a union of constants becomes an
 * enum, objects lose `additionalProperties: false` (the input is still checked strictly: an unknown field is answered
 * 400 naming it; the tool's own arguments too, see inputSchemaOf), and an integer's maximum of
 * Number.MAX_SAFE_INTEGER (no bound but JSON's own) goes. Types, formats, bounds, patterns and descriptions stay.
 */
export function compact(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(compact)
  if (!schema || typeof schema !== 'object') return schema
  const out: Schema = {}
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'additionalProperties' && value === false) continue
    if (key === 'maximum' && value === Number.MAX_SAFE_INTEGER) continue
    out[key] = key === 'properties' ? Object.fromEntries(Object.entries(value as Schema).map(([k, v]) => [k, compact(v)])) : compact(value)
  }
  const members = out.anyOf as Schema[] | undefined
  if (members?.length && members.every((m) => 'const' in m && Object.keys(m).every((k) => k === 'const' || k === 'type'))) {
    const types = new Set(members.map((m) => m.type))
    const { anyOf: _, ...rest } = out
    return { ...(types.size === 1 && members[0]!.type ? { type: members[0]!.type } : {}), enum: members.map((m) => m.const), ...rest }
  }
  return out
}

function inputSchemaOf(op: AnyOperation, layout: Map<string, Part> | null): Tool['inputSchema'] {
  const properties: Schema = {}
  const required: string[] = []
  if (layout) {
    for (const part of ['params', 'query', 'body'] as const) {
      const schema = json(op[part] ?? {})
      Object.assign(properties, compact(propertiesOf(schema)))
      required.push(...requiredOf(schema))
    }
  } else {
    if (op.params) (properties.path = compact(json(op.params))), required.push('path')
    if (op.query) (properties.query = compact(json(op.query))), requiredOf(op.query).length && required.push('query')
    if (op.body) (properties.body = compact(json(op.body))), bodyRequired(op.body) && required.push('body')
  }
  // Strict as every object in it (compact): 29 bytes a tool, and an unknown argument is refused 400 naming it anyway.
  return { type: 'object', properties, ...(required.length ? { required } : {}) } as Tool['inputSchema']
}

/**
 * Hints that differ from the specification's defaults (readOnlyHint false, destructiveHint true, idempotentHint false):
 * a GET only reads, a write that is not a DELETE destroys nothing, PUT and DELETE may be repeated.
 */
function annotationsOf(op: AnyOperation): Tool['annotations'] {
  if (op.method === 'GET') return { readOnlyHint: true }
  return {
    ...(op.method === 'DELETE' ? {} : { destructiveHint: false }),
    ...(op.method === 'PUT' || op.method === 'DELETE' ? { idempotentHint: true } : {}),
  }
}

/**
 * The tool of an operation. No outputSchema and no title: the result is the REST answer, which an agent reads when it
 * comes (a schema for every answer was half of the list's bytes), and the title repeated the description's summary.
 */
export function toolOf(op: AnyOperation): Tool {
  return {
    name: op.id,
    description: op.description ? `${op.summary}. ${op.description}` : op.summary,
    inputSchema: inputSchemaOf(op, flatLayout(op)),
    annotations: annotationsOf(op),
  }
}

/**
 * A tool call's arguments as invoke() input. The nested form `{path, query, body}` always works; a tool whose layout
 * is flat also takes its fields at the top level (`{channel, data}` for `{body: {channel, data}}`). One call uses one
 * form: names of both, or names of neither, are answered 400 naming them.
 */
export function inputOf(op: AnyOperation, args: Record<string, unknown>): RawInput {
  const names = Object.keys(args)
  if (names.every((name) => name in NESTED)) return { params: args.path as never, query: args.query as never, body: args.body }
  const layout = flatLayout(op)
  const stray = names.filter((name) => !layout?.has(name))
  if (!layout || stray.length) {
    const takes = layout ? `its fields (${[...layout.keys()].join(', ') || 'none'}) or path, query and body, not both` : 'only path, query and body'
    throw badRequest(`${op.id} takes ${takes}`, stray.map((name) => ({ path: `/${name}`, message: 'is not an allowed field' })))
  }
  const input: Record<Part, Record<string, unknown> | undefined> = {
    params: op.params ? {} : undefined, query: op.query ? {} : undefined, body: op.body ? {} : undefined,
  }
  for (const name of names) input[layout.get(name)!]![name] = args[name]
  return input
}
