// The text tiles' markdown (services/api/console/app/views/analytics/markdown.ts), parsed without a browser: only
// elements of the fixed list come out, HTML stays text, and only http(s) targets become links.
import { describe, expect, test } from 'bun:test'
import { type MarkdownNode, parseInline, parseMarkdown, safeHref } from '../../services/api/console/app/views/analytics/markdown'

const ALLOWED = new Set(['h4', 'h5', 'h6', 'p', 'ul', 'ol', 'li', 'pre', 'code', 'strong', 'em', 'a'])
/** Every element in a tree, depth first. */
const elements = (nodes: MarkdownNode[]): Exclude<MarkdownNode, string>[] =>
  nodes.flatMap((node) => (typeof node === 'string' ? [] : [node, ...elements(node.children)]))
const text = (nodes: MarkdownNode[]): string => nodes.map((node) => (typeof node === 'string' ? node : text(node.children))).join('')

describe('links', () => {
  test('a target with balanced parentheses is whole', () => {
    expect(parseInline('see [Foo](https://en.wikipedia.org/wiki/Foo_(bar)) now')).toEqual([
      'see ', { tag: 'a', href: 'https://en.wikipedia.org/wiki/Foo_(bar)', children: ['Foo'] }, ' now'])
    expect(parseInline('([x](https://e.com/a_(b)_(c)))')).toEqual(['(', { tag: 'a', href: 'https://e.com/a_(b)_(c)', children: ['x'] }, ')'])
    expect(parseInline('[x]( https://e.com/ )')).toEqual([{ tag: 'a', href: 'https://e.com/', children: ['x'] }])
    // Unbalanced: not a link, all of it text.
    expect(text(parseInline('[x](https://e.com/(a)'))).toBe('[x](https://e.com/(a)')
    expect(elements(parseInline('[x](https://e.com/(a)'))).toEqual([])
  })

  test('only an absolute http(s) target is a link; anything else stays the text it was typed as', () => {
    for (const target of ['javascript:alert(1)', 'JAVASCRIPT:alert(1)', 'data:text/html,<script>x</script>', '/relative', '//evil.example', 'vbscript:x', 'mailto:a@b.c']) {
      expect([target, safeHref(target)]).toEqual([target, undefined])
      const nodes = parseInline(`[click](${target})`)
      expect(elements(nodes)).toEqual([])
      expect(text(nodes)).toBe(`[click](${target})`)
    }
    expect(safeHref('https://example.com/a?b=1&c=2')).toBe('https://example.com/a?b=1&c=2')
    expect(safeHref('http://example.com')).toBe('http://example.com/')
  })
})

describe('safety', () => {
  test('HTML is text, and nothing but the fixed list of elements comes out', () => {
    const source = [
      '# <img src=x onerror=alert(1)>',
      '<script>alert(1)</script>',
      '- <iframe src="javascript:alert(1)">',
      '```',
      '<b onclick="x">code</b>',
      '```',
      '**<svg onload=alert(1)>** *x* `<a href="javascript:x">`',
      '[<b>label</b>](https://example.com)',
    ].join('\n')
    const nodes = parseMarkdown(source)
    const all = elements(nodes)
    expect(all.every((node) => ALLOWED.has(node.tag))).toBe(true)
    expect(all.filter((node) => node.href !== undefined).map((node) => [node.tag, node.href])).toEqual([['a', 'https://example.com/']])
    expect(text(nodes)).toContain('<script>alert(1)</script>')
    expect(text(nodes)).toContain('<img src=x onerror=alert(1)>')
    expect(text(nodes)).toContain('<b onclick="x">code</b>')
    expect(all.map((node) => node.tag)).toEqual(['h4', 'p', 'ul', 'li', 'pre', 'code', 'p', 'strong', 'em', 'code', 'a'])
  })

  test('headings sit below the tile title; underscores inside words stay text; escapes are text', () => {
    expect(parseMarkdown('# A\n## B\n###### C').map((node) => (node as { tag: string }).tag)).toEqual(['h4', 'h5', 'h6'])
    expect(parseInline('snake_case and window.__name')).toEqual(['snake_case and window.__name'])
    expect(parseInline('_em_ and __strong__')).toEqual([{ tag: 'em', children: ['em'] }, ' and ', { tag: 'strong', children: ['strong'] }])
    expect(parseInline('\\*not em\\* \\[x\\](https://e.com)')).toEqual(['*not em* [x](https://e.com)'])
    expect(parseInline('**open without close')).toEqual(['**open without close'])
  })
})

// A text tile holds at most 4 000 characters (services/api/analytics/dashboard-schemas.ts). Each input below made the
// old renderer rescan the rest of the text from every mark (or backtrack over a heading's spaces): quadratic or worse,
// 40 such tiles froze a viewer's tab for seconds.
const BOUND = 4000
const fill = (unit: string, length = BOUND) => unit.repeat(Math.floor(length / unit.length))
const PATHOLOGICAL: Record<string, (length: number) => string> = {
  'underscores that never close': (length) => fill('_a ', length),
  'stars that never close': (length) => fill('*a ', length),
  'double stars that never close': (length) => fill('**a ', length),
  'double underscores that never close': (length) => fill('__a ', length),
  'every mark opened, none closed': (length) => fill('**a *b __c _d [e ', length),
  'brackets that never close': (length) => fill('[', length),
  'links that never close': (length) => fill('[a](', length),
  'a link target of open parentheses': (length) => `[a](${fill('(', length - 4)}`,
  'backticks': (length) => `x${fill('`', length - 1)}`,
  'emphasis nested a thousand deep': (length) => fill('_a ', (length * 3) / 4) + fill('_', length / 4),
  'a heading with a run of spaces': (length) => `# a${fill(' ', length - 4)}b`,
}

describe('pathological input at the 4 000-character bound', () => {
  test('reads as it always did: unclosed marks are text, nesting is kept', () => {
    const paragraph = (source: string): MarkdownNode[] => [{ tag: 'p', children: [source.trim()] }]
    for (const name of ['underscores that never close', 'stars that never close', 'double stars that never close',
      'double underscores that never close', 'every mark opened, none closed', 'brackets that never close',
      'links that never close', 'a link target of open parentheses', 'backticks']) {
      const source = PATHOLOGICAL[name]!(BOUND)
      expect([name, source.length > BOUND - 10, parseMarkdown(source)]).toEqual([name, true, paragraph(source)])
    }
    expect(parseMarkdown(PATHOLOGICAL['a heading with a run of spaces']!(BOUND))).toEqual([{ tag: 'h4', children: [`a${' '.repeat(BOUND - 4)}b`] }])

    // `_a ` 1 000 times, then 1 000 `_`: the nth `_a ` closes at the nth-last `_`, down to 999 levels.
    let nested: MarkdownNode = { tag: 'em', children: ['a _a _'] }
    for (let level = 1; level < 999; level++) nested = { tag: 'em', children: ['a ', nested] }
    expect(parseMarkdown(PATHOLOGICAL['emphasis nested a thousand deep']!(BOUND))).toEqual([{ tag: 'p', children: [nested] }])

    // Well-formed nesting, repeated to the bound, keeps every element.
    const unit = '**a *b __c _d e_ f__ g* h** '
    const nodes = parseMarkdown(fill(unit))
    expect(elements(nodes).map((node) => node.tag)).toEqual(['p', ...Array(Math.floor(BOUND / unit.length)).fill(['strong', 'em', 'strong', 'em']).flat()])
  })

  // One coarse bound on the whole, not a timing of each: about 0.25 s here, where the old renderer took 18 s for the
  // quadratic inputs alone (and hours for the heading). Twenty times the margin for a loaded machine.
  test('40 tiles of each at the bound render within seconds (the old renderer froze a tab for minutes)', () => {
    const sources = Object.values(PATHOLOGICAL).map((make) => make(BOUND))
    for (const source of sources) parseMarkdown(source) // compiled before it is timed
    const started = performance.now()
    for (let tile = 0; tile < 40; tile++) for (const source of sources) parseMarkdown(source)
    expect(performance.now() - started).toBeLessThan(5000)
  })
})
