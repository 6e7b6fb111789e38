// An area's stylesheet is concatenated after the console's and every other area's (services/api/console/serve.ts), so a
// bare rule (`.badge`, `button.small`) would restyle the other areas too. Each rule of these areas' stylesheets is
// therefore scoped under the area's root, the shell's `.content[data-area="<area>"]`.
import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

const views = join(import.meta.dir, '../../services/api/console/app/views')

/** Every selector of a flat stylesheet (no at-rules or nesting, as the areas' are), comments left out. */
function selectors(css: string): string[] {
  const rules = css.replace(/\/\*[\s\S]*?\*\//g, '').matchAll(/([^{}]+)\{[^{}]*\}/g)
  return [...rules].flatMap((rule) => rule[1]!.split(',').map((selector) => selector.trim()))
}

describe('console area styles', () => {
  for (const area of ['mail', 'realtime']) {
    test(`every rule of ${area}/area.css applies only inside the ${area} area`, () => {
      const css = readFileSync(join(views, area, 'area.css'), 'utf8')
      expect(css).not.toContain('@') // flat rules only: an @media block would need its rules checked inside it
      const found = selectors(css)
      expect(found.length).toBeGreaterThan(10)
      expect(found.filter((selector) => !selector.startsWith(`.content[data-area="${area}"] `))).toEqual([])
    })
  }
})
