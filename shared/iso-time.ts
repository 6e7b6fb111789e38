// ISO-8601 times as users send them, checked field by field. JavaScript's Date rolls 2026-02-30 over to March and takes
// year 0 or a +23:00 offset, all of which PostgreSQL refuses; a time that passes here is one PostgreSQL stores as is.

const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?(Z|([+-])(\d{2}):?(\d{2}))?)?$/

/** The furthest offset from UTC any zone uses (Pacific/Kiritimati, +14:00). */
const MAX_OFFSET_MINUTES = 14 * 60

const isLeap = (year: number) => (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0
const daysIn = (year: number, month: number) => [31, isLeap(year) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]!

/**
 * The instant an ISO-8601 text names, or null when it is not one: a real calendar date, hours 00-23, minutes and
 * seconds 00-59, an offset within ±14:00, and an instant within the years 0001 to 9999 UTC. Without an offset the time
 * is UTC, and a date alone is its midnight; with `zoneRequired` both a time and its zone must be given.
 */
export function parseIsoTime(text: string, options: { zoneRequired?: boolean } = {}): Date | null {
  const m = ISO.exec(text)
  if (!m) return null
  const [year, month, day, hour, minute, second] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i] ?? 0)) as [number, number, number, number, number, number]
  if (options.zoneRequired && (m[4] === undefined || m[8] === undefined)) return null
  if (year < 1 || month < 1 || month > 12 || day < 1 || day > daysIn(year, month)) return null
  if (hour > 23 || minute > 59 || second > 59) return null
  let offset = 0
  if (m[9] !== undefined) {
    const [hours, minutes] = [Number(m[10]), Number(m[11])]
    offset = (hours * 60 + minutes) * (m[9] === '-' ? -1 : 1)
    if (minutes > 59 || Math.abs(offset) > MAX_OFFSET_MINUTES) return null
  }
  const at = new Date(0)
  at.setUTCFullYear(year, month - 1, day) // not Date.UTC: it reads years 0-99 as 1900-1999
  at.setUTCHours(hour, minute - offset, second, Number((m[7] ?? '0').padEnd(3, '0').slice(0, 3)))
  const utcYear = at.getUTCFullYear()
  return utcYear >= 1 && utcYear <= 9999 ? at : null
}

/** Whether a Date lies within the years PostgreSQL and ISO-8601 texts share here (0001 to 9999 UTC). */
export const withinIsoYears = (at: Date) => !Number.isNaN(at.getTime()) && at.getUTCFullYear() >= 1 && at.getUTCFullYear() <= 9999
