// Reads a tree of declared variables from an environment: every value checked against its rule, every problem reported
// at once (one line each), former names read with a warning. Pure: the caller decides what to log and when to stop.
import { ConfigError, Variable, type Declarations, type Values } from './variable'

export type Environment = Readonly<Record<string, string | undefined>>

export interface Reading<D> {
  values: Values<D>
  /** One line per former name in use: what to set instead. */
  warnings: string[]
}

/** Every variable of a tree, in declaration order. */
export function variablesOf(tree: Declarations): Variable<unknown>[] {
  return Object.values(tree).flatMap((entry) => entry instanceof Variable ? [entry] : variablesOf(entry))
}

/** The text set for `variable` (as set, spaces kept) and the name it was set under, preferring its name to a former one. */
function setting(variable: Variable<unknown>, env: Environment, warnings: string[]): [string, string] | undefined {
  // Blank counts as unset, as it always has: `VAR=` in an env file means "the default".
  const given = (name: string) => env[name]?.trim() ? env[name] : undefined
  const current = given(variable.name)
  for (const former of variable.formerNames) {
    if (given(former) === undefined) continue
    warnings.push(current === undefined
      ? `${former} is renamed ${variable.name}: set ${variable.name} instead (${former} is read for one more release)`
      : `${former} is ignored: ${variable.name}, its new name, is set too; remove ${former}`)
    if (current === undefined) return [given(former)!, former]
  }
  return current === undefined ? undefined : [current, variable.name]
}

/**
 * Reads `tree` from `env`: the values in the tree's shape, and warnings for former names. Throws one Error listing
 * every refused value, each line naming the variable and its rule (`API_PORT must be an integer from 1 to 65535, got
 * "http"`).
 */
export function readConfiguration<D extends Declarations>(tree: D, env: Environment): Reading<D> {
  const variables = variablesOf(tree)
  const byName = new Map<string, Variable<unknown>>()
  for (const variable of variables) {
    for (const name of [variable.name, ...variable.formerNames]) {
      if (byName.has(name)) throw new Error(`configuration: ${name} is declared twice`)
      byName.set(name, variable)
    }
  }

  const warnings: string[] = []
  const problems: string[] = []
  const read = new Map<Variable<unknown>, unknown>()
  const valueFor = (variable: Variable<unknown>): unknown => {
    if (read.has(variable)) return read.get(variable)
    const set = setting(variable, env, warnings)
    let value: unknown
    try {
      value = set ? variable.parse(...set) : variable.defaultValue(lookup)
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error
      problems.push(error.message)
      value = variable.defaultValue(lookup) // so that defaults built from it can still be read; the process stops anyway
    }
    read.set(variable, value)
    return value
  }
  const lookup = (name: string) => {
    const variable = byName.get(name)
    if (!variable) throw new Error(`configuration: a default reads ${name}, which is not declared`)
    return valueFor(variable)
  }
  for (const variable of variables) valueFor(variable)
  if (problems.length) throw new Error(`Configuration refused:\n${problems.join('\n')}`)

  const build = (node: Declarations): Record<string, unknown> =>
    Object.fromEntries(Object.entries(node).map(([key, entry]) => [key, entry instanceof Variable ? read.get(entry) : build(entry)]))
  return { values: build(tree) as Values<D>, warnings }
}
