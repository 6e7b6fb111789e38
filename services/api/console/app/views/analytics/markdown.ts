// Markdown of a text tile, rendered safe by construction: the renderer only ever creates a fixed set of elements and
// text nodes, so no HTML in the source can pass through (`<script>` stays the eight characters it is), and a link is
// an <a> only when its target parses as an http(s) URL. What it knows: headings, paragraphs, bullet and numbered lists,
// fenced code, **bold**, *italic*, `code`, [links](https://…) and backslash escapes; anything else is text.
// Parsing (parseMarkdown, pure: unit-tested without a browser) is apart from building the DOM (renderMarkdown), and
// linear in the text's length: a tile is anyone's text, and must not freeze the tab of whoever views the dashboard.
import { h } from '../../dom'
import { closingAt, type EmphasisMark, indexInline, type InlineIndex, isSpace } from './markdown-index'

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
    const heading = headingOf(line)
    if (heading) {
      const tag = HEADINGS[Math.min(heading.level, HEADINGS.length) - 1]!
      fragment.push(element(tag, parseInline(heading.text)))
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

/**
 * `# Title` or `### Title ###`: its level and text, or undefined. Read by hand: the expression this replaces,
 * /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/, backtracked cubically over a long run of spaces in a title (seconds a tile).
 */
function headingOf(line: string): { level: number; text: string } | undefined {
  let at = 0
  while (at < 3 && isSpace(line[at])) at++
  const hashes = at
  while (line[at] === '#') at++
  const level = at - hashes
  if (level < 1 || level > 6 || !isSpace(line[at])) return undefined
  while (isSpace(line[at])) at++
  // Closing hashes and the spaces around them are not part of the title.
  let end = line.length
  while (end > at && isSpace(line[end - 1])) end--
  while (end > at && line[end - 1] === '#') end--
  while (end > at && isSpace(line[end - 1])) end--
  const text = line.slice(at, end)
  // As before: a line separator inside the title (where the expression's `.` stopped) makes the line no heading.
  return /[\u2028\u2029]/.test(text) ? undefined : { level, text }
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

const EMPHASIS: [EmphasisMark, 'strong' | 'em'][] = [['**', 'strong'], ['__', 'strong'], ['*', 'em'], ['_', 'em']]

/**
 * Inline markup as nodes; an opening mark without its closing one is plain text. Linear in the text's length: every
 * "where does this close?" is a lookup in tables built once (markdown-index.ts), and nested markup is read in place,
 * each character by one level only.
 */
export function parseInline(text: string): MarkdownNode[] {
  return parseSpan(indexInline(text), 0, text.length)
}

// Emphasis opens before a non-space; with `_` only at the start of a word (so snake_case and window.__name stay
// text), as CommonMark reads them. `start` and `limit` bound the span being read, as if it were the whole text.
function opens(text: string, at: number, mark: string, start: number, limit: number): boolean {
  const after = at + mark.length < limit ? text[at + mark.length] : undefined
  if (after === undefined || isSpace(after)) return false
  return mark[0] === '*' || at === start || /[\s([{"']/.test(text[at - 1]!)
}

/**
 * A link at `at` (`[label](target)`) inside a span ending at `limit`: where its label ends, its target and length, or
 * undefined. The target has no spaces and may hold balanced parentheses (https://en.wikipedia.org/wiki/Foo_(bar));
 * spaces around it are allowed.
 */
function linkAt(index: InlineIndex, at: number, limit: number): { labelEnd: number; target: string; length: number } | undefined {
  const { text } = index
  const labelEnd = index.nextBracketClose[at + 1]!
  if (labelEnd === at + 1 || labelEnd + 1 >= limit || text[labelEnd + 1] !== '(') return undefined
  const start = Math.min(index.nextNonSpace[labelEnd + 2]!, limit)
  const end = Math.min(index.nextSpace[start]!, index.nextUnmatchedParen[start]!, limit)
  const close = Math.min(index.nextNonSpace[end]!, limit)
  if (end === start || close === limit || text[close] !== ')') return undefined
  return { labelEnd, target: text.slice(start, end), length: close + 1 - at }
}

/** The inline markup of text[start, limit) as nodes. */
function parseSpan(index: InlineIndex, start: number, limit: number): MarkdownNode[] {
  const { text } = index
  const nodes: MarkdownNode[] = []
  let plain = ''
  const flush = () => {
    if (plain) nodes.push(plain)
    plain = ''
  }
  for (let i = start; i < limit;) {
    const char = text[i]!
    if (char === '\\' && i + 1 < limit && /[\\`*_[\]()#+\-.!<>]/.test(text[i + 1]!)) {
      plain += text[i + 1]
      i += 2
      continue
    }
    if (char === '`') {
      const end = index.nextBacktick[i + 1]!
      if (end > i + 1 && end < limit) {
        flush()
        nodes.push(element('code', [text.slice(i + 1, end)]))
        i = end + 1
        continue
      }
    }
    if (char === '[') {
      const link = linkAt(index, i, limit)
      if (link) {
        flush()
        const href = safeHref(link.target)
        // Any other target stays what it was typed as: visible text, never a link.
        nodes.push(href ? { tag: 'a', href, children: parseSpan(index, i + 1, link.labelEnd) } : text.slice(i, i + link.length))
        i += link.length
        continue
      }
    }
    const emphasis = EMPHASIS.find(([mark]) => i + mark.length <= limit && text.startsWith(mark, i))
    if (emphasis && opens(text, i, emphasis[0], start, limit)) {
      const [mark, tag] = emphasis
      const end = closingAt(index, mark, i + mark.length, limit)
      if (end > i + mark.length) {
        flush()
        nodes.push(element(tag, parseSpan(index, i + mark.length, end)))
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
