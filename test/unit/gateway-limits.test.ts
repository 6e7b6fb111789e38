// The gateway's per-IP windows: IPv6 addresses counted by /64, and a bounded number of addresses per window that a
// flood of new addresses cannot use to reset the counts. Pure: the clock is a parameter.
import { describe, expect, test } from 'bun:test'
import { addressKey, LocalWindows, SubjectConnections } from '../../gateway/limits'

describe('addressKey', () => {
  test('IPv4 addresses are their own key', () => {
    expect(addressKey('203.0.113.7')).toBe('203.0.113.7')
    expect(addressKey('203.0.113.8')).toBe('203.0.113.8')
  })

  test('IPv6 addresses are keyed by their /64, whatever the spelling', () => {
    const key = '2001:db8:1:2::/64'
    for (const ip of [
      '2001:db8:1:2::1', '2001:db8:1:2:ffff:ffff:ffff:ffff', '2001:0db8:0001:0002:0000:0000:0000:0001', '2001:DB8:1:2::abcd',
      '[2001:db8:1:2::1]', '2001:db8:1:2::1%eth0', '2001:db8:1:2:0:0:1.2.3.4', '2001:db8:1:2::1.2.3.4',
    ]) expect(addressKey(ip)).toBe(key)
    expect(addressKey('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64')
    expect(addressKey('::1')).toBe('0:0:0:0::/64')
    expect(addressKey('2001:db8::')).toBe('2001:db8:0:0::/64')
    expect(addressKey('64:ff9b::192.0.2.1')).toBe('64:ff9b:0:0::/64')
  })

  test('what is not an IPv6 address is its own key', () => {
    for (const odd of ['1::2::3', '1:2:3:4:5:6:7:8:9', 'g::1', 'unknown', '1:2:3']) expect(addressKey(odd)).toBe(odd)
  })
})

describe('LocalWindows', () => {
  test('counts per address in fixed windows, with Retry-After to the next window', () => {
    const windows = new LocalWindows(2, 60_000)
    expect(windows.hit('198.51.100.1', 60_000)).toEqual({ allowed: true })
    expect(windows.hit('198.51.100.1', 61_000)).toEqual({ allowed: true })
    expect(windows.hit('198.51.100.1', 90_000)).toEqual({ allowed: false, retryAfter: 30 })
    expect(windows.hit('198.51.100.2', 90_000)).toEqual({ allowed: true })
    expect(windows.hit('198.51.100.1', 120_000)).toEqual({ allowed: true }) // the next window
  })

  test('the addresses of one /64 share one count; another /64 has its own', () => {
    const windows = new LocalWindows(3, 60_000)
    for (let i = 1; i <= 3; i++) expect(windows.hit(`2001:db8:aa:bb::${i.toString(16)}`, 0).allowed).toBe(true)
    expect(windows.hit('2001:db8:aa:bb:1234:5678:9abc:def0', 0)).toEqual({ allowed: false, retryAfter: 60 })
    expect(windows.hit('2001:db8:aa:bc::1', 0).allowed).toBe(true)
    expect(windows.size).toBe(2)
  })

  test('past maxKeys addresses in a window a new address is refused (crowded); the counted ones keep their own limit and stay counted', () => {
    const windows = new LocalWindows(2, 60_000, 100)
    expect(windows.hit('192.0.2.1', 0)).toEqual({ allowed: true })
    expect(windows.hit('192.0.2.1', 0)).toEqual({ allowed: true })
    expect(windows.hit('192.0.2.1', 0)).toEqual({ allowed: false, retryAfter: 60 })
    // A flood of 10 000 new addresses in the same window.
    const refused = { crowded: 0, other: 0 }
    for (let i = 0; i < 10_000; i++) {
      const result = windows.hit(`10.0.${i >> 8}.${i & 255}`, 1000)
      if (!result.allowed) refused[result.crowded ? 'crowded' : 'other']++
    }
    expect(windows.size).toBe(100)
    expect(refused).toEqual({ crowded: 10_000 - 99, other: 0 })
    // The flood reset nothing: the address over its limit is still refused, as a counted one and not as a crowded one.
    expect(windows.hit('192.0.2.1', 2000)).toEqual({ allowed: false, retryAfter: 58 })
    expect(windows.hit('10.0.0.5', 2000)).toEqual({ allowed: true }) // counted before the map filled: its second hit
    expect(windows.hit('203.0.113.9', 2000)).toEqual({ allowed: false, retryAfter: 58, crowded: true })
    // The next window starts empty.
    expect(windows.hit('203.0.113.9', 60_000)).toEqual({ allowed: true })
    expect(windows.size).toBe(1)
  })

  test('a flood of addresses from one /64 takes one entry, not one each', () => {
    const windows = new LocalWindows(5, 60_000, 10)
    let allowed = 0
    for (let i = 0; i < 1000; i++) if (windows.hit(`2001:db8:1:1:${(i >> 12).toString(16)}:${(i & 4095).toString(16)}:0:1`, 0).allowed) allowed++
    expect(allowed).toBe(5)
    expect(windows.size).toBe(1)
    expect(windows.hit('198.51.100.7', 0)).toEqual({ allowed: true })
  })
})

test('SubjectConnections: a place per open connection, freed on release; an entry only while one is open', () => {
  const subjects = new SubjectConnections(2)
  expect([subjects.take('p', 'ext:a'), subjects.take('p', 'ext:a'), subjects.take('p', 'ext:a')]).toEqual([true, true, false])
  expect(subjects.take('q', 'ext:a')).toBe(true)
  subjects.release('p', 'ext:a')
  expect(subjects.take('p', 'ext:a')).toBe(true)
})
