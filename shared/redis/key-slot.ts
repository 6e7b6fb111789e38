// Which Redis Cluster slot a key lives in, computed as Redis does: pure, so keys can be grouped by slot (and so by
// node) without a client, in tests and benchmarks too.

const UTF8 = new TextEncoder()

/** A key's cluster slot: CRC16 (XMODEM) of its hash tag (the first non-empty `{...}`) or of the key, mod 16 384. */
export function keySlot(key: string): number {
  const open = key.indexOf('{')
  const close = open >= 0 ? key.indexOf('}', open + 1) : -1
  const tagged = close > open + 1 ? key.slice(open + 1, close) : key
  let crc = 0
  for (const byte of UTF8.encode(tagged)) {
    crc ^= byte << 8
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  }
  return crc % 16_384
}
