// docs/errors.md is read from the data: its tables must equal the error catalog (shared/error-catalog.ts), the gateway's
// error frame codes and the close-code table (shared/realtime/close-codes.ts), row for row. Edit the data, then the doc.
import { describe, expect, test } from 'bun:test'
import { encode, FRAME_ERROR_CODES } from '../../gateway/protocol'
import { ERROR_CODES, ERRORS } from '../../shared/error-catalog'
import { DISCONNECTS } from '../../shared/realtime/close-codes'

const doc = await Bun.file(new URL('../../docs/errors.md', import.meta.url)).text()
const yesNo = (flag: boolean) => (flag ? 'yes' : 'no')

/** The body rows of the first table under the `## <heading>` of docs/errors.md. */
function rowsUnder(heading: string): string[] {
  const section = doc.split(/^## /m).find((part) => part.startsWith(heading + '\n'))
  if (!section) throw new Error(`docs/errors.md has no "## ${heading}" section`)
  const table = section.split('\n').filter((line) => line.startsWith('|'))
  return table.slice(2) // the header and its separator
}

describe('docs/errors.md', () => {
  test('lists every HTTP error code of the catalog with its status, temporary flag and meaning, in order', () => {
    const expected = ERROR_CODES.map((code) => {
      const entry: { status: number; alsoStatus?: number; temporary: boolean; description: string } = ERRORS[code]
      const status = entry.alsoStatus ? `${entry.status}, ${entry.alsoStatus}` : String(entry.status)
      return `| \`${code}\` | ${status} | ${yesNo(entry.temporary)} | ${entry.description} |`
    })
    expect(rowsUnder('HTTP error codes')).toEqual(expected)
  })

  test("lists the gateway's error frame codes with the catalog's temporary flag", () => {
    expect(rowsUnder('Gateway error frames')).toEqual(FRAME_ERROR_CODES.map((code) => `| \`${code}\` | ${yesNo(ERRORS[code].temporary)} |`))
  })

  test('lists every close code with its reason, reconnect rule, least delay and meaning', () => {
    const expected = Object.values(DISCONNECTS).map((close) => {
      const minDelay = 'minDelayMs' in close ? `${close.minDelayMs} ms` : '-'
      return `| \`${close.code}\` | ${close.reason} | \`${close.reconnect}\` | ${minDelay} | ${close.description} |`
    })
    expect(rowsUnder('Close codes')).toEqual(expected)
  })
})

test('an error frame carries the temporary flag of its code in the catalog (frames as before)', () => {
  expect(FRAME_ERROR_CODES.map((code) => encode.error(2, code, 'm'))).toEqual([
    '{"type":"error","id":2,"code":"invalid","message":"m","temporary":false}',
    '{"type":"error","id":2,"code":"forbidden","message":"m","temporary":false}',
    '{"type":"error","id":2,"code":"unavailable","message":"m","temporary":true}',
    '{"type":"error","id":2,"code":"rate_limited","message":"m","temporary":true}',
  ])
})
