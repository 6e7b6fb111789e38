// Markdown of a text tile, rendered safe by construction: the renderer only ever creates a fixed set of elements and
// text nodes, so no HTML in the source can pass through (`<script>` stays the eight characters it is), and a link is
// an <a> only when its target parses as an http(s) URL. What it knows: headings, paragraphs, bullet and numbered lists,
// fenced code, **bold**, *italic*, `code`, [links](https://…) and backslash escapes; anything else is text.
// Parsing (parseMarkdown, pure: unit-tested without a browser) is apart from building the DOM (renderMarkdown).
import { h } from '../../dom'

// A tile's title is its h3; headings inside the text sit below it.
const HEADINGS = ['h4', 'h5', 'h6'] as const

/** Every element the renderer can make: nothing else can come out of it. */
export type MarkdownTag = (typeof HEADINGS)[number] | 'p' | 'ul' | 'ol' | 'li' | 'pre' | 'code' | 'strong' | 'em' | 'a'
/** Text, or an element of the fixed list; `href` only on `a`, and only an http(s) URL (safeHref). */
export type MarkdownNode = string | { tag: MarkdownTag; href?: string; children: MarkdownNode[] }

/** The markdown as a fragment of elements and text nodes. */
export function renderMarkdown(source: string): DocumentFragment {
  const fragment = document.createDocumentFragment()
  for (const node of parseMarkdown(source)) fragment.appendChild(toDom(node))
  return fragment
}

function toDom(node: MarkdownNode): Node {
  if (typeof node === 'string') return document.createTextNode(node)
  const children = node.children.map(toDom)
  return node.tag === 'a'
    ? h('a', { href: node.href!, rel: 'noopener noreferrer', target: '_blank' }, children)
    : h(node.tag, {}, children)
}

const element = (tag: MarkdownTag, children: MarkdownNode[]): MarkdownNode => ({ tag, children })

/** The markdown's blocks as a tree of text and elements of the fixed list. */
export function parseMarkdown(source: string): MarkdownNode[] {
  const fragment: MarkdownNode[] = []
  const lines = source.replace(/\r\n?/g, '\n').split('\n')
  for (let i = 0; i < lines.length;) {
    const line = lines[i]!
    if (!line.trim()) { i++; continue }
    if (/^\s*```/.test(line)) {
      const code: string[] = []
      for (i++; i < lines.length && !/^\s*```/.test(lines[i]!); i++) code.push(lines[i]!)
      i++ // the closing fence (or the end)
      fragment.push(element('pre', [element('code', [code.join('\n')])]))
      continue
    }
    const heading = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line)
    if (heading) {
      const tag = HEADINGS[Math.min(heading[1]!.length, HEADINGS.length) - 1]!
      fragment.push(element(tag, parseInline(heading[2]!)))
      i++
      continue
    }
    const list = listItem(line)
    if (list) {
      const items: MarkdownNode[] = []
      for (let item = listItem(lines[i] ?? ''); item && item.ordered === list.ordered; item = listItem(lines[++i] ?? '')) {
        items.push(element('li', parseInline(item.text)))
      }
      fragment.push(element(list.ordered ? 'ol' : 'ul', items))
      continue
    }
    const paragraph: string[] = []
    for (; i < lines.length && lines[i]!.trim() && !startsBlock(lines[i]!); i++) paragraph.push(lines[i]!.trim())
    fragment.push(element('p', parseInline(paragraph.join(' '))))
  }
  return fragment
}

function listItem(line: string): { ordered: boolean; text: string } | undefined {
  const bullet = /^\s*[-*+]\s+(.*)$/.exec(line)
  if (bullet) return { ordered: false, text: bullet[1]! }
  const numbered = /^\s*\d{1,9}[.)]\s+(.*)$/.exec(line)
  return numbered ? { ordered: true, text: numbered[1]! } : undefined
}

const startsBlock = (line: string) => /^\s*```/.test(line) || /^\s{0,3}#{1,6}\s/.test(line) || listItem(line) !== undefined

/** A link target the page may follow: an absolute http(s) URL, nothing else (no javascript:, data:, relative paths). */
export function safeHref(target: string): string | undefined {
  try {
    const url = new URL(target)
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : undefined
  } catch {
    return undefined
  }
}

const EMPHASIS: [string, 'strong' | 'em'][] = [['**', 'strong'], ['__', 'strong'], ['*', 'em'], ['_', 'em']]

// Emphasis opens before a non-space; with `_` only at the start of a word (so snake_case and window.__name stay
// text), as CommonMark reads them.
function opens(text: string, at: number, mark: string): boolean {
  const after = text[at + mark.length]
  if (after === undefined || /\s/.test(after)) return false
  return mark[0] === '*' || at === 0 || /[\s([{"']/.test(text[at - 1]!)
}

function closing(text: string, from: number, mark: string): number {
  for (let end = text.indexOf(mark, from); end !== -1; end = text.indexOf(mark, end + 1)) {
    const before = text[end - 1]!
    const after = text[end + mark.length]
    // `**` is not a closing `*`; a closing `_` ends a word.
    if (mark === '*' && after === '*') { end++; continue }
    if (/\s/.test(before)) continue
    if (mark[0] === '_' && after !== undefined && /[\p{L}\p{N}_]/u.test(after)) continue
    return end
  }
  return -1
}

/**
 * A link at `at` (`[text](target)`): its text, target and length, or undefined. The target has no spaces and may hold
 * balanced parentheses (https://en.wikipedia.org/wiki/Foo_(bar)); spaces around it are allowed.
 */
function linkAt(text: string, at: number): { label: string; target: string; length: number } | undefined {
  const label = /^\[([^\]]+)\]\(\s*/.exec(text.slice(at))
  if (!label) return undefined
  let end = at + label[0].length
  let depth = 0
  const start = end
  for (; end < text.length; end++) {
    const char = text[end]!
    if (/\s/.test(char)) break
    if (char === '(') depth++
    else if (char === ')') {
      if (depth === 0) break
      depth--
    }
  }
  const target = text.slice(start, end)
  while (end < text.length && /\s/.test(text[end]!)) end++
  if (!target || text[end] !== ')') return undefined
  return { label: label[1]!, target, length: end + 1 - at }
}

/** Inline markup as nodes; an opening mark without its closing one is plain text. */
export function parseInline(text: string): MarkdownNode[] {
  const nodes: MarkdownNode[] = []
  let plain = ''
  const flush = () => {
    if (plain) nodes.push(plain)
    plain = ''
  }
  for (let i = 0; i < text.length;) {
    const char = text[i]!
    if (char === '\\' && i + 1 < text.length && /[\\`*_[\]()#+\-.!<>]/.test(text[i + 1]!)) {
      plain += text[i + 1]
      i += 2
      continue
    }
    if (char === '`') {
      const end = text.indexOf('`', i + 1)
      if (end > i + 1) {
        flush()
        nodes.push(element('code', [text.slice(i + 1, end)]))
        i = end + 1
        continue
      }
    }
    if (char === '[') {
      const link = linkAt(text, i)
      if (link) {
        flush()
        const href = safeHref(link.target)
        // Any other target stays what it was typed as: visible text, never a link.
        nodes.push(href ? { tag: 'a', href, children: parseInline(link.label) } : text.slice(i, i + link.length))
        i += link.length
        continue
      }
    }
    const emphasis = EMPHASIS.find(([mark]) => text.startsWith(mark, i))
    if (emphasis && opens(text, i, emphasis[0])) {
      const [mark, tag] = emphasis
      const end = closing(text, i + mark.length, mark)
      if (end > i + mark.length) {
        flush()
        nodes.push(element(tag, parseInline(text.slice(i + mark.length, end))))
        i = end + mark.length
        continue
      }
    }
    plain += char
    i++
  }
  flush()
  return nodes
}
