// Validates an operation's path, query and body against its schemas and reports every failing field by JSON pointer.
import type { TSchema } from 'typebox'
import { Compile } from 'typebox/compile'
import { Settings } from 'typebox/system'
import Value from 'typebox/value'
import { badRequest, type FieldError } from '../errors'
import { bodyRequired } from './operation'

// TypeBox stops at 8 errors by default. A union fails in every branch at once, and the tile branch the `type` does not
// pick reports first: with few errors kept, the chosen branch's own were cut off and a bad tile was named nowhere.
// Errors are only collected for a value that already failed, so the higher bound costs nothing on valid input.
Settings.Set({ maxErrors: 2000 })

type Part = 'params' | 'query' | 'body'
interface Validator {
  Check(value: unknown): boolean
  Errors(value: unknown): Iterable<RawError>
}
const compiled = new WeakMap<TSchema, Validator>()

function validator(schema: TSchema): Validator {
  let check = compiled.get(schema)
  if (!check) compiled.set(schema, (check = leanValidator(schema)))
  return check
}

/** Where an array of strings must hold each once: property names, and `*` for every item of an array on the way. */
type UniquePath = readonly string[]

/**
 * TypeBox checks `uniqueItems` by hashing every item (a 64-bit FNV-1a in BigInt, then hex): for a token's `ops` that
 * was a twentieth of the token route's CPU. Arrays of strings reached through properties and items are checked here
 * with a Set instead, the same rule for strings; a value that fails either check goes to the full validator, so its
 * errors are TypeBox's as before.
 */
function leanValidator(schema: TSchema): Validator {
  const full = Compile(schema) as unknown as Validator
  const paths: UniquePath[] = []
  const lean = withoutStringUniqueness(schema, [], paths)
  if (paths.length === 0) return full
  const fast = Compile(lean as TSchema)
  return {
    Check: (value) => fast.Check(value) && paths.every((path) => distinctAt(value, path, 0)),
    Errors: (value) => full.Errors(value) as Iterable<RawError>,
  }
}

const isStringSchema = (schema: Record<string, unknown>): boolean =>
  schema.type === 'string' || typeof schema.const === 'string' ||
  (Array.isArray(schema.anyOf) && schema.anyOf.every((branch) => isStringSchema(branch as Record<string, unknown>)))

/** A copy of `schema` without `uniqueItems` on arrays of strings reached through properties and items; their paths. */
function withoutStringUniqueness(schema: unknown, path: string[], paths: UniquePath[]): unknown {
  if (!schema || typeof schema !== 'object') return schema
  const node = schema as Record<string, unknown>
  let copy: Record<string, unknown> | undefined
  const set = (key: string, value: unknown) => {
    if (value === node[key]) return
    copy ??= copyOf(node)
    copy[key] = value
  }
  if (node.type === 'array' && node.items && typeof node.items === 'object') {
    const items = node.items as Record<string, unknown>
    if (node.uniqueItems === true && isStringSchema(items)) {
      copy = copyOf(node)
      delete copy.uniqueItems
      paths.push(path)
    }
    set('items', withoutStringUniqueness(items, [...path, '*'], paths))
  }
  if (node.properties && typeof node.properties === 'object') {
    const properties = node.properties as Record<string, unknown>
    let changed: Record<string, unknown> | undefined
    for (const [name, property] of Object.entries(properties)) {
      const lean = withoutStringUniqueness(property, [...path, name], paths)
      if (lean !== property) (changed ??= { ...properties })[name] = lean
    }
    if (changed) set('properties', changed)
  }
  return copy ?? schema
}

/**
 * A shallow copy of a schema node that keeps what a spread drops: TypeBox's non-enumerable properties (a refinement's
 * `~refine`, which Check runs) and the prototype.
 */
const copyOf = (node: Record<string, unknown>): Record<string, unknown> =>
  Object.create(Object.getPrototypeOf(node), Object.getOwnPropertyDescriptors(node))

/** Whether every array at `path` under `value` (already checked against the schema) holds each string once. */
function distinctAt(value: unknown, path: UniquePath, at: number): boolean {
  if (value === undefined || value === null) return true // an optional field left out
  if (at === path.length) return !Array.isArray(value) || new Set(value).size === value.length
  if (path[at] === '*') return !Array.isArray(value) || value.every((item) => distinctAt(item, path, at + 1))
  return distinctAt((value as Record<string, unknown>)[path[at]!], path, at + 1)
}

/** Path and query values arrive as strings: convert them to the schema's types before checking. */
export function checkPart(part: Part, schema: TSchema | undefined, value: unknown): { value: unknown; errors: FieldError[] } {
  if (!schema) return { value: undefined, errors: [] }
  // A copy of the raw values: the conversion may change the object it is given.
  const input = part === 'body' ? value : keepUnwrittenNumbers(schema, { ...(value as object) }, Value.Convert(schema, value ?? {}))
  const check = validator(schema)
  if (check.Check(input)) return { value: input, errors: [] }
  const errors = describe(part, [...check.Errors(input)])
  // Never let a value that failed through for want of a described error.
  return { value: input, errors: errors.length ? errors : [{ path: '/' + PART_NAME[part], message: 'does not match the schema' }] }
}

/** How a path or query value must be written to convert to an integer, and to a number: plain decimals only. */
const INTEGER_TEXT = /^-?(?:0|[1-9][0-9]*)$/
const DECIMAL_TEXT = /^-?[0-9]+(?:\.[0-9]+)?$/

/**
 * TypeBox's conversion truncates a string such as "1.5", and a number such as 1.5 (an MCP tool call passes JSON
 * numbers), to an integer: `?limit=1.5` would pass as 1. And it reads a number as JavaScript's Number() does: "0x10"
 * as 16, "1e3", "+7", " 5" and ".5" too. A path or query value converts only when it is written as a plain decimal
 * (an integer without a fraction); otherwise it stays what it was, and the check names it (`/query/limit must be
 * integer`, `/query/last_ms must be number`).
 */
function keepUnwrittenNumbers(schema: TSchema, raw: unknown, converted: unknown): unknown {
  const properties = (schema as { properties?: Record<string, { type?: string }> }).properties
  if (!properties || typeof raw !== 'object' || raw === null || typeof converted !== 'object' || converted === null) return converted
  for (const [name, property] of Object.entries(properties)) {
    const value = (raw as Record<string, unknown>)[name]
    const unwritten = property.type === 'integer'
      ? (typeof value === 'string' ? !INTEGER_TEXT.test(value) : typeof value === 'number' && !Number.isInteger(value))
      : property.type === 'number' && typeof value === 'string' && !DECIMAL_TEXT.test(value)
    if (unwritten) (converted as Record<string, unknown>)[name] = value
  }
  return converted
}

const PART_NAME: Record<Part, string> = { params: 'path', query: 'query', body: 'body' }

interface RawError {
  keyword: string
  schemaPath: string
  instancePath: string
  params: Record<string, unknown>
  message: string
}

/**
 * A union of objects told apart by a `type` constant (dashboard tiles) fails every branch at once, so the raw errors
 * mix both kinds' rules. Keep only the errors of the branch the value's `type` names; when it names none, one error
 * on `type` listing the kinds.
 */
function narrowTaggedUnions(errors: RawError[]): RawError[] {
  const unions = new Map<string, { branches: Set<string>; untagged: Set<string>; allowed: unknown[]; instancePath: string }>()
  for (const error of errors) {
    // An error belongs to every union it sits under (unions nest: a tile's title is itself a union with null).
    for (const match of error.schemaPath.matchAll(/\/anyOf\/(\d+)(?=\/|$)/g)) {
      const prefix = error.schemaPath.slice(0, match.index! + '/anyOf'.length)
      const branch = match[1]!
      const union = unions.get(prefix) ?? { branches: new Set(), untagged: new Set(), allowed: [], instancePath: '' }
      unions.set(prefix, union)
      union.branches.add(branch)
      if (error.keyword === 'const' && error.schemaPath === `${prefix}/${branch}/properties/type`) {
        union.untagged.add(branch)
        union.allowed.push(error.params.allowedValue)
        union.instancePath = error.instancePath.replace(/\/type$/, '')
      }
    }
  }
  let out = errors
  for (const [prefix, union] of unions) {
    if (union.untagged.size === 0) continue // not a tagged union
    const chosen = [...union.branches].filter((b) => !union.untagged.has(b))
    const unionError = (e: RawError) => e.keyword === 'anyOf' && e.schemaPath === prefix.slice(0, -'/anyOf'.length)
    const inUnion = (e: RawError) => unionError(e) || e.schemaPath.startsWith(prefix + '/')
    const inBranch = (e: RawError, branch: string) => e.schemaPath === `${prefix}/${branch}` || e.schemaPath.startsWith(`${prefix}/${branch}/`)
    if (chosen.length === 1) {
      out = out.filter((e) => !inUnion(e) || inBranch(e, chosen[0]!))
    } else if (chosen.length === 0) {
      out = out.filter((e) => !inUnion(e))
      out.push({
        keyword: 'const', schemaPath: prefix, instancePath: `${union.instancePath}/type`, params: {},
        message: `must be one of: ${union.allowed.map((v) => JSON.stringify(v)).join(', ')}`,
      })
    }
  }
  return out
}

/**
 * An untagged union (a string or null, a scalar or a list) fails in each branch at the same field: keep what the value
 * broke (`must not have more than 120 characters`), not the union's summary or the `null` branch's `must be null`.
 */
function dropUnionNoise(errors: RawError[]): RawError[] {
  const noise = (e: RawError) => e.keyword === 'anyOf' || (e.keyword === 'type' && e.params.type === 'null')
  const informative = new Set(errors.filter((e) => !noise(e)).map((e) => e.instancePath))
  return errors.filter((e) => !noise(e) || !informative.has(e.instancePath))
}

function describe(part: Part, raw: RawError[]): FieldError[] {
  const errors = dropUnionNoise(narrowTaggedUnions(raw))
  const root = '/' + PART_NAME[part]
  const out = new Map<string, FieldError>()
  const add = (path: string, message: string) => out.set(path + '\0' + message, { path, message })
  for (const error of errors) {
    if (error.keyword === 'additionalProperties') {
      for (const name of (error.params.additionalProperties as string[]) ?? [])
        add(`${root}${error.instancePath}/${name}`, 'is not an allowed field')
    } else if (error.keyword === 'boolean' && error.schemaPath.endsWith('additionalProperties')) {
      add(root + error.instancePath, 'is not an allowed field')
    } else if (error.keyword === 'required') {
      for (const name of (error.params.requiredProperties as string[]) ?? [])
        add(`${root}${error.instancePath}/${name}`, 'is required')
    } else {
      add(root + error.instancePath, error.message)
    }
  }
  return [...out.values()]
}

/**
 * Strings PostgreSQL cannot store as text (NUL) or that are not valid Unicode (unpaired surrogates), and numbers JSON
 * cannot carry (1e999 parses as Infinity and would be re-served as null), are refused at the edge, so they can never
 * surface later as a storage failure or a silently changed value.
 */
function unstorableStrings(value: unknown, path: string, out: FieldError[]): FieldError[] {
  if (storable(value)) return out
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) out.push({ path, message: 'must be a finite number' })
  } else if (typeof value === 'string') {
    if (value.includes('\u0000') || !value.isWellFormed()) out.push({ path, message: 'must be valid Unicode text without NUL characters' })
  } else if (Array.isArray(value)) {
    value.forEach((item, i) => unstorableStrings(item, `${path}/${i}`, out))
  } else if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      if (key.includes('\u0000') || !key.isWellFormed()) out.push({ path: `${path}/${key}`, message: 'field names must be valid Unicode' })
      else unstorableStrings(item, `${path}/${key}`, out)
    }
  }
  return out
}

/** unstorableStrings' rule without its paths: whether `value` holds nothing it refuses (no string made per field). */
function storable(value: unknown): boolean {
  if (typeof value === 'string') return !value.includes('\u0000') && value.isWellFormed()
  if (typeof value === 'number') return Number.isFinite(value)
  if (Array.isArray(value)) {
    for (const item of value) if (!storable(item)) return false
    return true
  }
  if (value && typeof value === 'object') {
    for (const key of Object.keys(value)) {
      if (!storable(key) || !storable((value as Record<string, unknown>)[key])) return false
    }
  }
  return true
}

/** Validates all three parts; throws one 400 naming every failing field. */
export function validateInput(
  schemas: { params?: TSchema; query?: TSchema; body?: TSchema },
  raw: { params?: unknown; query?: unknown; body?: unknown },
) {
  const params = checkPart('params', schemas.params, raw.params)
  const query = checkPart('query', schemas.query, raw.query)
  const body = checkPart('body', schemas.body, raw.body === undefined && schemas.body && !bodyRequired(schemas.body) ? {} : raw.body)
  const fields = [
    ...params.errors, ...query.errors, ...body.errors,
    ...unstorableStrings(raw.params, '/path', []), ...unstorableStrings(raw.query, '/query', []),
    ...(schemas.body ? unstorableStrings(raw.body, '/body', []) : []),
  ]
  if (fields.length) {
    const names = fields.map((f) => `${f.path} ${f.message}`).join('; ')
    throw badRequest(`Invalid request: ${names}`, fields)
  }
  return { params: params.value, query: query.value, body: body.value }
}
