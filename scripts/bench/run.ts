// What the benchmarks share: their options read as positive integers, and what every one that starts processes and
// makes a product does at its end: the product deleted (what hangs off it goes with it), the shared connections closed,
// every process it started stopped whatever happened.

/** A `--name` option's value as a positive integer; anything else stops the benchmark naming the option. */
export function positive(name: string, raw: string): number {
  const value = Number(raw)
  if (!Number.isInteger(value) || value <= 0) throw new Error(`--${name} must be a positive integer, got "${raw}"`)
  return value
}

/** The processes a benchmark started: each is killed and awaited by runBench. */
export type Children = ReturnType<typeof Bun.spawn>[]

/**
 * Runs `main`; then, whatever happened, kills and awaits every process in `children` and runs `after`; then exits 0
 * (an error of `main` is thrown first, so the run fails with it).
 */
export async function runBench(main: () => Promise<void>, children: Children, after: () => void = () => {}): Promise<never> {
  try {
    await main()
  } finally {
    for (const child of children) child.kill()
    await Promise.all(children.map((c) => c.exited))
    after()
  }
  process.exit(0)
}

/**
 * Runs `main`, then `cleanUp` once whatever happened: at the end, after a failure (printed as `benchmark failed: ...`,
 * exit 1), and on Ctrl-C or SIGTERM, which skip `finally` (exit 130).
 */
export async function runCleaningUp(main: () => Promise<void>, cleanUp: () => Promise<void>): Promise<never> {
  let cleaning: Promise<void> | undefined
  const once = () => (cleaning ??= cleanUp())
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void once().finally(() => process.exit(130)))
  let failed = false
  try {
    await main()
  } catch (error) {
    failed = true
    console.error('benchmark failed:', error instanceof Error ? error.message : error)
  } finally {
    await once()
  }
  process.exit(failed ? 1 : 0)
}

/**
 * Deletes the benchmark's product and closes the shared PostgreSQL and Redis connections. Imported when called: a
 * benchmark may point REDIS_URL at a Redis of its own before the clients read the configuration.
 */
export async function dropProduct(productId: string): Promise<void> {
  const [{ sql }, { closeRedis }] = await Promise.all([import('../../shared/db/client'), import('../../shared/redis/client')])
  await sql`delete from products where id = ${productId}`
  await closeRedis()
  await sql.end()
}
