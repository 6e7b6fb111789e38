// The webhooks view appears in two areas (Realtime and Mail), so its stylesheet cannot be scoped to one area's root as
// the areas' are (test/unit/console-area-styles.test.ts): every rule is scoped under the view's own root instead,
// `.webhooks-view`, inside its one @media block too, so it never restyles anything else of the console.
import { expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'

const css = readFileSync(join(import.meta.dir, '../../services/api/console/app/views/webhooks/area.css'), 'utf8')

/** Every selector, comments left out and @media wrappers opened (their rules are checked like the others). */
function selectors(text: string): string[] {
  const flat = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/@media[^{]*\{([\s\S]*?\})\s*\}/g, '$1')
  expect(flat).not.toContain('@') // any other at-rule would need its own reading
  return [...flat.matchAll(/([^{}]+)\{[^{}]*\}/g)].flatMap((rule) => rule[1]!.split(',').map((selector) => selector.trim()))
}

test('every rule of webhooks/area.css applies only inside .webhooks-view', () => {
  const found = selectors(css)
  expect(found.length).toBeGreaterThan(20)
  expect(found.filter((selector) => !selector.startsWith('.webhooks-view '))).toEqual([])
})
