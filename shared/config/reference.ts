// docs/configuration.md as the declarations say it: every variable, its default, what it accepts and what it does, by
// area. scripts/config-docs.ts writes the page; test/unit/config-reference.test.ts fails when the page differs.
import { AREAS } from './areas'
import type { Area, Variable } from './variable'

/** A table cell: one line, pipes escaped. */
const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\s*\n\s*/g, ' ')

function defaultOf(variable: Variable<unknown>): string {
  if (variable.secret) return 'unset'
  return variable.shownDefault === '' ? 'unset' : `\`${variable.shownDefault}\``
}

function row(variable: Variable<unknown>): string {
  const former = variable.formerNames.length
    ? ` Formerly ${variable.formerNames.map((name) => `\`${name}\``).join(', ')} (still read, with a warning, for one release).`
    : ''
  return `| \`${variable.name}\` | ${defaultOf(variable)} | ${cell(variable.rule)} | ${cell(variable.description + former)} |`
}

function section(area: Area): string[] {
  return [
    `## ${area.title}`, '', area.summary, '',
    '| Variable | Default | Accepts | Meaning |', '| --- | --- | --- | --- |',
    ...Object.values(area.variables).map(row), '',
  ]
}

/** The page, from `areas` (every area unless given). */
export function renderReference(areas: readonly Area[] = AREAS): string {
  const renamed = areas.flatMap((area) => Object.values(area.variables))
    .flatMap((variable) => variable.formerNames.map((former) => `| \`${former}\` | \`${variable.name}\` |`))
  return [
    '# Configuration',
    '',
    'Every environment variable the platform\'s processes read: its default, the values it accepts and what it does, by area.',
    'Generated from the declarations in `shared/config/areas/` by `bun run scripts/config-docs.ts`: change those, then run it.',
    '',
    'Every process reads the same variables once, at start, and every one has a working local default. A value the',
    'variable does not accept stops the process with a message naming the variable and the rule (`CACHE_TTL_MS must be',
    'an integer from 100 to 600000, got "abc"`), as do settings that are never safe together (a development-only switch',
    'outside a development `PLATFORM_ENV`, a webhook lease shorter than an attempt, a metrics listener beyond loopback',
    'without a token). Integers are written in plain digits.',
    '',
    ...areas.flatMap(section),
    '## Renamed variables',
    '',
    'An old name still works for one release: the process logs a warning at start naming the new one, and the new name',
    'wins when both are set ([upgrading](upgrading.md#configuration-checked-at-start-three-variables-renamed)).',
    '',
    '| Old name | New name |', '| --- | --- |',
    ...renamed,
    '',
  ].join('\n')
}
