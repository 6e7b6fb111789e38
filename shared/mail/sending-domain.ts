// A product's sending domain as the two sides need it: the public route checks the `from` domain when an email is
// queued (by name, within the product); the mailer signs with the domain's DKIM key when it delivers (by id, as queued).
import { sql } from '../db/client'
import { aadOf } from '../db/seal-secrets'
import { open } from '../secrets'

export interface SendingDomain {
  id: string
  name: string
  status: string
}

export interface SigningDomain {
  status: string
  name: string
  selector: string
  privateKey: string
}

/** The product's domain called `name`, whatever its status; null when the product has none by that name. */
export async function sendingDomainNamed(productId: string, name: string): Promise<SendingDomain | null> {
  const [row] = await sql`select id, name, status from mail_domains where product_id = ${productId} and name = ${name}`
  return row ? { id: row.id, name: row.name, status: row.status } : null
}

/** Private DKIM keys by domain id: unsealed once per process (a domain's key never changes). */
const privateKeys = new Map<string, string>()

/** The domain an email was queued from as it is now, with its signing key; null once the domain is deleted. */
export async function signingDomain(domainId: string): Promise<SigningDomain | null> {
  const cached = privateKeys.get(domainId)
  const [row] = cached
    ? await sql`select name, dkim_selector, status from mail_domains where id = ${domainId}`
    : await sql`select name, dkim_selector, status, secret_sealed from mail_domains where id = ${domainId}`
  if (!row) return null
  const privateKey = cached ?? open(Buffer.from(row.secret_sealed), aadOf('mail_domains', domainId)).toString()
  privateKeys.set(domainId, privateKey)
  return { status: row.status, name: row.name, selector: row.dkim_selector, privateKey }
}
