// The one bound of the process-local memos on hot paths (shards, publish keys, key digests): a memo at its limit
// starts over instead of evicting one entry at a time. Whatever an attacker cycles through (channel names, keys), the
// memory stays bounded, and a memo refilled from scratch costs only the work it saves.

/** Sets `key` in `map`, first emptying it when it already holds `max` entries. */
export function keepBounded<K, V>(map: Map<K, V>, max: number, key: K, value: V): void {
  if (map.size >= max) map.clear()
  map.set(key, value)
}
