// The inspector shows payloads others published: bounded text whatever their size or nesting (the browser test,
// test/console/realtime.test.ts, shows the same through the gateway within what the API accepts).
import { describe, expect, test } from 'bun:test'
import { PRETTY_MAX_DEPTH, SHOWN_PAYLOAD_CHARS, payloadText } from '../../services/api/console/app/views/realtime/format'

describe('inspector payload text', () => {
  test('a small payload is pretty-printed whole, with no note', () => {
    const data = { text: 'hi', list: [1, 2, { ok: true }] }
    expect(payloadText({ data })).toEqual({ text: JSON.stringify(data, null, 2), note: null })
    expect(payloadText({ ref: { bucket: 'b', key: 'k' } })).toEqual({ text: `stored payload ${JSON.stringify({ bucket: 'b', key: 'k' }, null, 2)}`, note: null })
  })

  test('a large payload is cut to SHOWN_PAYLOAD_CHARS, with a note of how much', () => {
    const data = { blob: 'y'.repeat(1_000_000) }
    const { text, note } = payloadText({ data })
    expect(text).toBe(`${JSON.stringify(data).slice(0, SHOWN_PAYLOAD_CHARS)}…`)
    expect(note).toContain(`Showing the first 16 KB of ${Math.ceil(JSON.stringify(data).length / 1024)} KB.`)
  })

  test('a cut never splits a surrogate pair', () => {
    const data = `${'a'.repeat(SHOWN_PAYLOAD_CHARS - 2)}😀😀😀` // the quote, then 😀 across the cut
    const { text } = payloadText({ data })
    expect(text.length).toBeLessThanOrEqual(SHOWN_PAYLOAD_CHARS + 1)
    expect(text.isWellFormed()).toBe(true)
  })

  test('deep nesting is shown compact (no depth × lines of indentation); deeper than can be written out, a note alone', () => {
    const deep = JSON.parse(`${'['.repeat(5000)}1${']'.repeat(5000)}`)
    const { text, note } = payloadText({ data: deep })
    expect(text).toBe(`${'['.repeat(5000)}1${']'.repeat(5000)}`)
    expect(note).toBe('Nested 5000 levels deep: shown compact.')
    expect(payloadText({ data: JSON.parse(`${'['.repeat(PRETTY_MAX_DEPTH)}${']'.repeat(PRETTY_MAX_DEPTH)}`) }).note).toBeNull()
    const brackets = '{"a":'.repeat(20) + '"[[[[{{{{"' + '}'.repeat(20) // brackets inside strings are not nesting
    expect(payloadText({ data: JSON.parse(brackets) }).note).toBeNull()
    const abyss: unknown[] = []
    let cursor = abyss
    for (let i = 0; i < 100_000; i++) cursor.push((cursor = []))
    expect(payloadText({ data: abyss })).toEqual({ text: '', note: 'This payload cannot be shown: it nests too deeply to be written out.' })
  })
})
