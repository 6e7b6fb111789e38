// Where, in a text tile's inline markup, each emphasis mark can close and each part of a link ends: tables built in
// one pass over the text, so that the inline parser (markdown.ts) answers "where does this close?" in constant time
// instead of rescanning the rest of the text from every opening mark (which made 4 000 characters of `_a _a _a`
// cost millions of steps). Positions are indexes into the whole text; a table's value n means "nowhere".

export type EmphasisMark = '**' | '__' | '*' | '_'

export const isSpace = (char: string | undefined) => char !== undefined && /\s/.test(char)
const isWordChar = (char: string | undefined) => char !== undefined && /[\p{L}\p{N}_]/u.test(char)

export interface InlineIndex {
  text: string
  /**
   * Per mark, the first position at or after p where the mark closes, reading the text to its end: before it a
   * non-space; a closing `_` or `__` ends a word; a closing `*` ends a run of `*` of odd length (read from the run's
   * start in pairs, a `**` is never a closing `*`).
   */
  closer: Record<EmphasisMark, Int32Array>
  /** The start of the run of `*` that holds position p (p itself when text[p] is not `*`). */
  starRunStart: Int32Array
  nextBacktick: Int32Array
  nextBracketClose: Int32Array
  nextSpace: Int32Array
  nextNonSpace: Int32Array
  /** The first `)` at or after p that closes no `(` opened at or after p: where a link target that starts at p ends. */
  nextUnmatchedParen: Int32Array
}

/** Each position's first position at or after it where `holds` is true (n when none). */
function nextWhere(n: number, holds: (p: number) => boolean): Int32Array {
  const next = new Int32Array(n + 1)
  next[n] = n
  for (let p = n - 1; p >= 0; p--) next[p] = holds(p) ? p : next[p + 1]!
  return next
}

export function indexInline(text: string): InlineIndex {
  const n = text.length
  // Each character's class read once: the tables below ask about neighbours several times.
  const space = new Uint8Array(n + 1)
  const word = new Uint8Array(n + 1)
  for (let p = 0; p < n; p++) {
    space[p] = isSpace(text[p]) ? 1 : 0
    word[p] = isWordChar(text[p]) ? 1 : 0
  }
  const spaceBefore = (p: number) => p > 0 && space[p - 1] === 1
  const starRunStart = new Int32Array(n + 1)
  for (let p = 0; p <= n; p++) starRunStart[p] = p > 0 && text[p] === '*' && text[p - 1] === '*' ? starRunStart[p - 1]! : p
  const pair = (p: number, char: string) => text[p] === char && text[p + 1] === char
  const closer: Record<EmphasisMark, Int32Array> = {
    '**': nextWhere(n, (p) => pair(p, '*') && !spaceBefore(p)),
    '__': nextWhere(n, (p) => pair(p, '_') && !spaceBefore(p) && word[p + 2] !== 1),
    '*': nextWhere(n, (p) => text[p] === '*' && text[p + 1] !== '*' && (p - starRunStart[p]!) % 2 === 0 && !spaceBefore(p)),
    '_': nextWhere(n, (p) => text[p] === '_' && !spaceBefore(p) && word[p + 1] !== 1),
  }
  return {
    text,
    closer,
    starRunStart,
    nextBacktick: nextWhere(n, (p) => text[p] === '`'),
    nextBracketClose: nextWhere(n, (p) => text[p] === ']'),
    nextSpace: nextWhere(n, (p) => space[p] === 1),
    nextNonSpace: nextWhere(n, (p) => space[p] === 0),
    nextUnmatchedParen: unmatchedParens(text),
  }
}

// With depth(k) the count of `(` minus `)` in text[0, k), the `)` that closes nothing opened since p is where depth
// first falls below depth(p): the next smaller value, found for every p at once with a stack.
function unmatchedParens(text: string): Int32Array {
  const n = text.length
  const depth = new Int32Array(n + 1)
  for (let k = 0; k < n; k++) depth[k + 1] = depth[k]! + (text[k] === '(' ? 1 : text[k] === ')' ? -1 : 0)
  const next = new Int32Array(n + 1)
  const stack: number[] = []
  for (let p = n; p >= 0; p--) {
    while (stack.length && depth[stack[stack.length - 1]!]! >= depth[p]!) stack.pop()
    next[p] = stack.length ? stack[stack.length - 1]! - 1 : n
    stack.push(p)
  }
  return next
}

/**
 * Where `mark`, opened just before `from`, closes inside a part of the text that ends at `limit` (emphasis nested in
 * emphasis or a link label), or -1. Only the mark that touches `limit` reads differently from the whole text's table:
 * nothing follows it there, so it closes if a non-space precedes it (and, for `*`, its run is of odd length).
 * `from` is never inside a run of `*` (an opening `*` is followed by something else), so runs are read from their start.
 */
export function closingAt(index: InlineIndex, mark: EmphasisMark, from: number, limit: number): number {
  const { text } = index
  const end = index.closer[mark][from]!
  if (end + mark.length < limit) return end
  const last = limit - mark.length
  if (last < from || !text.startsWith(mark, last) || isSpace(text[last - 1])) return -1
  if (mark === '*' && (last - index.starRunStart[last]!) % 2 !== 0) return -1
  return last
}
