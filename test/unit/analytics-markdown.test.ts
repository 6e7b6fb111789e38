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
