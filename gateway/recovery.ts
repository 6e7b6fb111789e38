// The race-free join of missed and live messages when a subscription starts with a cursor (or starts at all on a
// channel with history): the subscription is registered live first and buffers, history after the cursor is read, then
// both are merged by offset. Pure, so the rule is tested without Redis.

/** A publication and where it stands in its channel. */
export interface Positioned {
  offset: number
  /** The encoded publication frame. */
  frame: string
}

/**
 * What to send, in order, so the client has every message after `after` exactly once: the history entries and the live
 * ones that arrived meanwhile, merged by offset, duplicates (a message both in history and buffered) dropped, nothing at
 * or before `after`.
 * @example merge([{offset: 4}, {offset: 5}], [{offset: 5}, {offset: 6}], 3) // → offsets 4, 5, 6
 */
export function merge(history: readonly Positioned[], buffered: readonly Positioned[], after: number): Positioned[] {
  const byOffset = new Map<number, Positioned>()
  for (const item of [...history, ...buffered]) {
    if (item.offset > after && !byOffset.has(item.offset)) byOffset.set(item.offset, item)
  }
  return [...byOffset.values()].sort((a, b) => a.offset - b.offset)
}
