// How the inspector writes channel data and times as text (never markup: a payload is shown, never interpreted).

/** A payload as readable text: JSON pretty-printed, or the stored object an over-cap publish was delivered as. */
export const payloadText = (entry: { data?: unknown; ref?: unknown }): string =>
  entry.ref !== undefined ? `stored payload ${JSON.stringify(entry.ref, null, 2)}` : JSON.stringify(entry.data, null, 2) ?? 'null'

/** A moment as the reader's local clock time to the millisecond: "18:24:31.708". */
export const clockTime = (date: Date): string =>
  `${date.toLocaleTimeString(undefined, { hour12: false })}.${String(date.getMilliseconds()).padStart(3, '0')}`
