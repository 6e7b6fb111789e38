// The README, the changelog and docs/ are read by following their links: every relative link must reach a file, and a
// link with an anchor a heading of that file (GitHub's anchors). Pages under docs/ are reference, so no heading there
// carries a date or an issue number: history goes to CHANGELOG.md (docs/upgrading.md for an operator's steps).
import { describe, expect, test } from 'bun:test'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'

const root = join(import.meta.dir, '../..')
const pages = ['README.md', 'CHANGELOG.md', ...readdirSync(join(root, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)]
  .filter((page) => existsSync(join(root, page)))

/** The page's text outside fenced code blocks, line by line. */
function proseLines(text: string): string[] {
  let fenced = false
  return text.split('\n').map((line) => {
    if (/^\s*(```|~~~)/.test(line)) { fenced = !fenced; return '' }
    return fenced ? '' : line
  })
}

/** The anchors GitHub gives a page's headings: lower case, punctuation dropped, each space a hyphen, repeats numbered. */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>()
  const seen = new Map<string, number>()
  for (const line of proseLines(text)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line)
    if (!heading) continue
    const base = heading[1]!.replace(/<[^>]+>/g, '').replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/ /g, '-')
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    anchors.add(count === 0 ? base : `${base}-${count}`)
  }
  return anchors
}

function headingsOf(text: string): string[] {
  return proseLines(text).filter((line) => /^#{1,6}\s/.test(line))
}

function linksOf(text: string): string[] {
  const links: string[] = []
  for (const line of proseLines(text)) {
    const prose = line.replace(/`[^`]*`/g, '')
    for (const match of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) links.push(match[1]!)
  }
  return links
}

// Pages another branch is adding at the same time: a link to one counts as reaching it until the page lands, and from
// then on is checked like any other. None now (docs/configuration.md has landed, generated from shared/config/areas/).
const PENDING = new Set<string>()

const texts = new Map<string, string>()
function textOf(path: string): string {
  if (!texts.has(path)) texts.set(path, readFileSync(path, 'utf8'))
  return texts.get(path)!
}

describe('docs', () => {
  test('every relative link in README.md, CHANGELOG.md and docs/*.md reaches a file, and its anchor a heading there', () => {
    const broken: string[] = []
    for (const page of pages) {
      const from = join(root, page)
      for (const link of linksOf(textOf(from))) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue // https:, mailto: ...
        const [path, anchor] = link.split('#', 2) as [string, string | undefined]
        const target = path === '' ? from : join(dirname(from), decodeURIComponent(path))
        if (!existsSync(target) && PENDING.has(relative(root, target))) continue
        if (!existsSync(target)) { broken.push(`${page}: ${link} (no such file)`); continue }
        if (anchor === undefined || anchor === '' || statSync(target).isDirectory() || !target.endsWith('.md')) continue
        if (!anchorsOf(textOf(target)).has(decodeURIComponent(anchor).toLowerCase())) {
          broken.push(`${page}: ${link} (no heading #${anchor} in ${relative(root, target)})`)
        }
      }
    }
    expect(broken).toEqual([])
  })

  test('no heading under docs/ carries a date or an issue number', () => {
    const dated: string[] = []
    for (const page of pages.filter((page) => page.startsWith('docs/'))) {
      for (const heading of headingsOf(textOf(join(root, page)))) {
        if (/\b\d{4}-\d{2}-\d{2}\b|\bissues?\s*#?\d+|#\d+\b/i.test(heading)) dated.push(`${page}: ${heading}`)
      }
    }
    expect(dated).toEqual([])
  })

  test('every page under docs/ opens with a line saying what it is for', () => {
    for (const page of pages.filter((page) => page.startsWith('docs/'))) {
      const lines = textOf(join(root, page)).split('\n')
      expect(lines[0]).toMatch(/^# \S/)
      const first = lines.slice(1).find((line) => line.trim() !== '')
      expect(first === undefined || /^(#|```|\||!\[)/.test(first) ? `${page}: no opening line` : 'ok').toBe('ok')
    }
  })
})
