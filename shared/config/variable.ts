// One environment variable as data: its name, the rule its value keeps, its default and its meaning. The area files
// beside this one declare every variable with these constructors; ./read.ts reads them, ./reference.ts documents them.

/** Reads another declared variable's value (a default built from it, such as API_URL's from API_PORT). */
export type Lookup = (name: string) => unknown

/** A default: a value, or one built from other variables or the host (then `shown` says it in the reference). */
type Default<T> = T | { value: (lookup: Lookup) => T; shown: string }

interface Common {
  /** One line: what the variable does, for docs/configuration.md. */
  description: string
  /** Earlier names still read for one release, each with a warning naming this one. */
  formerNames?: readonly string[]
}

/** Thrown by a parser: the whole message, naming the variable and the rule. */
export class ConfigError extends Error {}

/** A declared variable whose value, read and checked, has type T (its private members make the type nominal, so the
 * config tree's types tell a variable from a group of them). */
export class Variable<T> {
  constructor(
    readonly name: string,
    /** What a value must be, worded to follow "must be": `an integer from 1 to 65535`. */
    readonly rule: string,
    readonly description: string,
    readonly formerNames: readonly string[],
    /** The default as the reference shows it (empty: none). */
    readonly shownDefault: string,
    private readonly fallback: (lookup: Lookup) => T,
    /**
     * Reads the text of a set variable (never blank), as set: free text keeps its spaces (PLATFORM_ENV is part of a
     * key's hashed lookup), numbers, switches and URLs trim them. Throws ConfigError naming `as` and the rule.
     */
    private readonly parser: (text: string, as: string) => T,
    /** Never echoed in a message nor shown as a default: keys and tokens. */
    readonly secret = false,
    /** An integer's range, both ends included. */
    readonly bounds?: { readonly min: number; readonly max: number },
  ) {}

  /** The value when the variable is unset or empty. */
  defaultValue(lookup: Lookup): T { return this.fallback(lookup) }

  /** The value of `text` as set under the name `as` (this name or a former one). */
  parse(text: string, as: string): T { return this.parser(text, as) }

  /** The refusal of `text`: `<as> must be <rule>, got "<text>"`, the text hidden for a secret. */
  refuse(text: string, as: string): ConfigError {
    const shown = this.secret ? `a value of ${text.length} characters` : JSON.stringify(withoutPassword(text))
    return new ConfigError(`${as} must be ${this.rule}, got ${shown}`)
  }
}

/** A URL's password replaced by *** (a refusal is logged; the text may be a DATABASE_URL with credentials). */
export function withoutPassword(text: string): string {
  return text.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*:)[^@/]*@/i, '$1***@')
}

function defaults(given: Default<string>): [string, (lookup: Lookup) => string] {
  if (typeof given === 'object') return [given.shown, given.value]
  return [given, () => given]
}

/**
 * An integer from `min` to `max`, both included: every numeric setting has both bounds, so a typo (an extra zero, a
 * value in seconds for one in ms) stops the process at start instead of running it with a limit nobody meant.
 * @example integer('API_PORT', { default: 4100, min: 1, max: 65_535, description: 'The API listens here.' })
 */
export function integer(name: string, spec: Common & { default: number; min: number; max: number }): Variable<number> {
  const { min, max } = spec
  if (!(Number.isSafeInteger(min) && Number.isSafeInteger(max) && min <= spec.default && spec.default <= max)) {
    throw new Error(`${name}: the default ${spec.default} lies outside its bounds ${min} to ${max}`)
  }
  const variable: Variable<number> = new Variable(name, `an integer from ${min} to ${max}`, spec.description,
    spec.formerNames ?? [], String(spec.default), () => spec.default, (text, as) => {
      const value = /^\d+$/.test(text.trim()) ? Number(text) : NaN
      if (!(value >= min && value <= max)) throw variable.refuse(text, as)
      return value
    }, false, { min, max })
  return variable
}

/** A TCP port a process listens on. */
export const port = (name: string, fallback: number, description: string) =>
  integer(name, { default: fallback, min: 1, max: 65_535, description })

/** On or off: `1` or `true`, `0` or `false` (any case). Anything else is refused: `yes` was once read as off. */
export function flag(name: string, spec: Common & { default: boolean }): Variable<boolean> {
  const variable: Variable<boolean> = new Variable(name, '1, true, 0 or false', spec.description, spec.formerNames ?? [],
    spec.default ? '1' : '0', () => spec.default, (text, as) => {
      const value = text.trim().toLowerCase()
      if (value === '1' || value === 'true') return true
      if (value === '0' || value === 'false') return false
      throw variable.refuse(text, as)
    })
  return variable
}

/**
 * Free text; with `form`, text that matches it (`form[1]` words the rule).
 * @example text('MAIL_DKIM_SELECTOR', { default: 'platform', form: [/^[a-z0-9-]+$/, 'a DNS label'], description: '…' })
 */
export function text(name: string, spec: Common & { default: Default<string>; form?: [RegExp, string] }): Variable<string> {
  const [shown, fallback] = defaults(spec.default)
  const variable: Variable<string> = new Variable(name, spec.form?.[1] ?? 'any text', spec.description,
    spec.formerNames ?? [], shown, fallback, (value, as) => {
      if (spec.form && !spec.form[0].test(value)) throw variable.refuse(value, as)
      return value
    })
  return variable
}

/** The rule of a URL variable, from its schemes: `a redis:// or rediss:// URL`. */
const urlRule = (schemes: readonly string[]) =>
  `${/^(http|smtp)/.test(schemes[0]!) ? 'an' : 'a'} ${schemes.map((s) => `${s}://`).join(', ').replace(/, ([^,]*)$/, ' or $1')} URL`

/** A URL with one of `schemes`; only the scheme is checked (a PostgreSQL URL may name several hosts). */
function urlParser(schemes: readonly string[], refuse: (text: string, as: string) => ConfigError) {
  const pattern = new RegExp(`^(${schemes.map((s) => s.replace(/[+.]/g, '\\$&')).join('|')})://\\S+$`, 'i')
  return (text: string, as: string) => {
    const value = text.trim()
    if (!pattern.test(value)) throw refuse(value, as)
    return value
  }
}

/** A URL whose scheme is one of `schemes` (given without `://`). */
export function url(name: string, spec: Common & { default: Default<string>; schemes: readonly string[] }): Variable<string> {
  const [shown, fallback] = defaults(spec.default)
  const variable: Variable<string> = new Variable(name, urlRule(spec.schemes), spec.description, spec.formerNames ?? [],
    shown, fallback, urlParser(spec.schemes, (t, as) => variable.refuse(t, as)))
  return variable
}

/** A URL that may be left unset: null then (the feature it names is off). */
export function optionalUrl(name: string, spec: Common & { schemes: readonly string[] }): Variable<string | null> {
  const variable: Variable<string | null> = new Variable(name, urlRule(spec.schemes), spec.description,
    spec.formerNames ?? [], '', () => null, urlParser(spec.schemes, (t, as) => variable.refuse(t, as)))
  return variable
}

/**
 * A comma-separated list (items trimmed, empty ones dropped); unset: empty. With `item`, each item must match it.
 * @example list('REALTIME_PAYLOAD_BUCKETS', { item: [BUCKET, 'an S3 bucket name'], description: '…' })
 */
export function list(name: string, spec: Common & { item?: [RegExp, string] }): Variable<string[]> {
  const rule = spec.item ? `a comma-separated list, each item ${spec.item[1]}` : 'a comma-separated list'
  const variable: Variable<string[]> = new Variable(name, rule, spec.description, spec.formerNames ?? [], '', () => [],
    (value, as) => {
      const items = value.split(',').map((item) => item.trim()).filter(Boolean)
      const bad = spec.item && items.find((item) => !spec.item![0].test(item))
      if (bad !== undefined) throw new ConfigError(`${as} must be ${rule}, got "${withoutPassword(bad)}" in ${JSON.stringify(value)}`)
      return items
    })
  return variable
}

/** A key or token: never echoed in a message nor shown; unset: `unset`. Its form is checked where it is used. */
export function secret<U extends string | null>(name: string, spec: Common & { rule: string; unset: U }): Variable<string | U> {
  return new Variable<string | U>(name, spec.rule, spec.description, spec.formerNames ?? [], '', () => spec.unset,
    (value) => value, true)
}

/** Several secrets, comma-separated; unset: none. */
export function secretList(name: string, spec: Common & { rule: string }): Variable<string[]> {
  return new Variable(name, spec.rule, spec.description, spec.formerNames ?? [], '', () => [],
    (value) => value.split(',').map((item) => item.trim()).filter(Boolean), true)
}

/**
 * A value with its own reader, which throws naming the variable and the rule (a retry schedule's durations).
 * @example custom('WEBHOOK_RETRY_SCHEDULE', { default: DEFAULT, shown: '5s,5m', rule: 'durations', parse, description: '…' })
 */
export function custom<T>(name: string, spec: Common & {
  default: T; shown: string; rule: string; parse: (text: string, as: string) => T
}): Variable<T> {
  return new Variable(name, spec.rule, spec.description, spec.formerNames ?? [], spec.shown, () => spec.default,
    (value, as) => {
      try {
        return spec.parse(value, as)
      } catch (error) {
        throw new ConfigError(error instanceof Error ? error.message : String(error))
      }
    })
}

/** Variables, or groups of them, keyed as the config object is. */
export interface Declarations { readonly [key: string]: Variable<unknown> | Declarations }

/** The values a tree of declarations reads to: the same keys, each variable replaced by its value. */
export type Values<D> = { -readonly [K in keyof D]: D[K] extends Variable<infer T> ? T : Values<D[K]> }

/** A section of the reference: variables that configure one part of the platform, keyed by short names. */
export interface Area<V extends Record<string, Variable<unknown>> = Record<string, Variable<unknown>>> {
  title: string
  /** One or two sentences on what the section configures, for docs/configuration.md. */
  summary: string
  variables: V
}

export const area = <V extends Record<string, Variable<unknown>>>(title: string, summary: string, variables: V): Area<V> =>
  ({ title, summary, variables })
