// Address parsing benchmark: the one-pass scanner of shared/mail/addresses.ts against the regular-expression parser it
// replaced (copied here as the peer), on pathological 512-character mailboxes (whitespace, quotes, angle brackets,
// nested mixes) and on ordinary ones. Usage: bun run scripts/bench/addresses.ts [--rounds R] [--budget-ms MS]
// Needs nothing running. The inputs and the peer are exported: test/security/mail-addresses.test.ts checks each
// input's answer (the figures belong here, never in a test).
import os from 'node:os'
import { parseArgs } from 'node:util'
import { type Mailbox, parseMailbox } from '../../shared/mail/addresses'

/** The parser as it was before the scanner (shared/mail/addresses.ts at 709c93b), kept as the peer. */
const ADDRESS = /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@([A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+)$/
const NAMED = /^\s*(?:"([^"\\]*)"|([^<>"]*?))\s*<([^<>\s]+)>\s*$/
const SPECIALS = /[()<>[\]:;@\\,"]/
export function legacyParseMailbox(value: string): Mailbox | null {
  if (value.length > 512 || /[\r\n]/.test(value)) return null
  const named = NAMED.exec(value)
  const address = (named ? named[3]! : value.trim())
  const match = ADDRESS.exec(address)
  if (!match || address.length > 254) return null
  if (named && named[2] !== undefined && SPECIALS.test(named[2])) return null
  const name = named ? (named[1] ?? named[2] ?? '').trim() : ''
  return { ...(name ? { name } : {}), address, domain: match[1]!.toLowerCase() }
}

const fit = (text: string, length = 512) => text.slice(0, length)
const fill = (unit: string, length = 512) => fit(unit.repeat(Math.ceil(length / unit.length)), length)
const pad = (head: string, unit: string, tail: string) => head + fill(unit, 512 - head.length - tail.length) + tail

/** Each input with what it must parse to: null (refused) or the mailbox. Every one is 512 characters, the longest a mailbox may be. */
export const PATHOLOGICAL: { label: string; input: string; expect: Mailbox | null }[] = [
  { label: '512 spaces', input: fill(' '), expect: null },
  { label: '511 spaces then <', input: pad('', ' ', '<'), expect: null },
  { label: 'spaces around an unclosed <', input: pad('', ' ', '<a@b.co'), expect: null },
  { label: 'spaces, then a name word, spaces, <', input: pad('x', ' ', 'y <'), expect: null },
  { label: '"a" then spaces (no <)', input: pad('"a"', ' ', 'x'), expect: null },
  { label: '512 quotes', input: fill('"'), expect: null },
  { label: '512 <', input: fill('<'), expect: null },
  { label: '512 >', input: fill('>'), expect: null },
  { label: '" <" repeated', input: fill(' <'), expect: null },
  { label: '"a word " repeated, no <', input: fill('ab '), expect: null },
  { label: 'tab, space and nbsp mixed, then <', input: pad('', '\t \u00a0', '<'), expect: null },
  { label: '" \\"<" nested mix', input: fill(' "<'), expect: null },
  { label: '"<>" repeated', input: fill('<>'), expect: null },
  { label: 'quoted name of spaces then <addr> unclosed', input: pad('"', ' ', '" <a@b.co'), expect: null },
  { label: 'long unquoted name with a comma, then <addr>', input: pad('a,', ' b', ' <a@b.co>'), expect: null },
  { label: 'spaces then a valid bare address', input: pad('', ' ', 'ann@example.org'), expect: { address: 'ann@example.org', domain: 'example.org' } },
  { label: 'spaces, a long name, spaces, <addr>, spaces', input: pad('  Ann', ' ', '<ann@example.org>  '), expect: { name: 'Ann', address: 'ann@example.org', domain: 'example.org' } },
  { label: 'quoted name full of specials and <>', input: pad('"', '<>,;:@()', '" <ann@example.org>'), expect: { name: fill('<>,;:@()', 512 - 20), address: 'ann@example.org', domain: 'example.org' } },
  { label: 'address of dotted labels, too long (over 254)', input: pad('a@', 'b.', 'co'), expect: null },
  { label: 'label of hyphens (over 63)', input: pad('a@a', '-', 'a.co'), expect: null },
  { label: '<addr> then 490 spaces then junk', input: pad('<a@b.co>', ' ', 'x'), expect: null },
]

/** Ordinary mailboxes: the cost of the common case on both sides. */
export const ORDINARY = ['ann@example.org', 'Ann Smith <ann@example.org>', '"Doe, Jane" <jane.doe+news@mail.example.co.uk>', 'Émile Zola <emile@example.org>']

/** Time `parse(input)` repeated until `budgetMs` passed (at least 3 runs): microseconds per call, best and mean. */
function time(parse: (value: string) => unknown, input: string, budgetMs: number): { best: number; mean: number; runs: number } {
  let best = Infinity
  let total = 0
  let runs = 0
  const until = performance.now() + budgetMs
  while (runs < 3 || performance.now() < until) {
    const start = performance.now()
    parse(input)
    const took = (performance.now() - start) * 1000
    best = Math.min(best, took)
    total += took
    runs++
  }
  return { best, mean: total / runs, runs }
}

if (import.meta.main) {
  const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '3' }, 'budget-ms': { type: 'string', default: '100' } } })
  const rounds = Number(args.rounds)
  const budgetMs = Number(args['budget-ms'])
  console.log(`bun ${Bun.version}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? '?'}, ${os.release()}; ${rounds} rounds, ${budgetMs} ms per input and side`)
  const rows = [...PATHOLOGICAL.map((p) => ({ label: p.label, input: p.input })), ...ORDINARY.map((input) => ({ label: `ordinary: ${input}`, input }))]
  console.log(['input (chars)', 'scanner µs (best / mean)', 'regex peer µs (best / mean)', 'peer / scanner (mean)', 'same answer'].join(' | '))
  for (const row of rows) {
    const scanner = { best: Infinity, mean: 0, runs: 0 }
    const peer = { best: Infinity, mean: 0, runs: 0 }
    for (let round = 0; round < rounds; round++) {
      // Alternate which side runs first, so JIT warm-up and drift hit both alike.
      const order = round % 2 === 0 ? ['scanner', 'peer'] : ['peer', 'scanner']
      for (const side of order) {
        const result = time(side === 'scanner' ? parseMailbox : legacyParseMailbox, row.input, budgetMs)
        const into = side === 'scanner' ? scanner : peer
        into.best = Math.min(into.best, result.best)
        into.mean += result.mean / rounds
      }
    }
    const same = JSON.stringify(parseMailbox(row.input)) === JSON.stringify(legacyParseMailbox(row.input))
    console.log(`${row.label} (${row.input.length}) | ${scanner.best.toFixed(2)} / ${scanner.mean.toFixed(2)} | ${peer.best.toFixed(2)} / ${peer.mean.toFixed(2)} | ${(peer.mean / scanner.mean).toFixed(1)}× | ${same ? 'yes' : 'NO'}`)
  }
}
