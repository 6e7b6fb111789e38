// TXT lookups for domain checks. A long TXT record may come back split into several strings: they are joined. A name
// with no TXT record (ENODATA, ENOTFOUND) is an empty list, and so is a lookup that does not answer in time: a check
// never hangs, and a record it could not see is simply not verified yet.
import { Resolver } from 'node:dns/promises'
import { config } from '../config'

export async function lookupTxt(name: string): Promise<string[]> {
  const resolver = new Resolver({ timeout: config.mail.dnsTimeoutMs, tries: 1 })
  if (config.mail.dnsServers.length) resolver.setServers(config.mail.dnsServers)
  let timer: ReturnType<typeof setTimeout> | undefined
  const deadline = new Promise<string[][]>((resolve) => (timer = setTimeout(() => resolve([]), config.mail.dnsTimeoutMs)))
  try {
    const records = await Promise.race([resolver.resolveTxt(name), deadline])
    return records.map((chunks) => chunks.join(''))
  } catch {
    // ENODATA / ENOTFOUND: no such record; anything else (SERVFAIL, refused): not seen this time.
    return []
  } finally {
    clearTimeout(timer)
    resolver.cancel()
  }
}
