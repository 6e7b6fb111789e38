// One JSON line per event on stdout, so foreman and any log shipper can parse it.
export function log(level: 'info' | 'warn' | 'error', msg: string, fields: Record<string, unknown> = {}): void {
  const line = JSON.stringify({ t: new Date().toISOString(), level, proc: process.env.PROCESS_NAME ?? 'platform', pid: process.pid, msg, ...fields })
  if (level === 'error') console.error(line)
  else console.log(line)
}

export function describeError(error: unknown): Record<string, unknown> {
  return error instanceof Error ? { error: error.message, stack: error.stack } : { error: String(error) }
}
