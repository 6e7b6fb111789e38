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
 * Deletes the benchmark's product and closes the shared PostgreSQL and Redis connections. Imported when called: a
 * benchmark may point REDIS_URL at a Redis of its own before the clients read the configuration.
 */
export async function dropProduct(productId: string): Promise<void> {
  const [{ sql }, { closeRedis }] = await Promise.all([import('../../shared/db/client'), import('../../shared/redis/client')])
  await sql`delete from products where id = ${productId}`
  await closeRedis()
  await sql.end()
}
