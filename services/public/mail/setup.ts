// Domains and templates on the public surface, for full_access keys (as Resend's full-access keys manage domains): the
// same domain functions as the platform API, answered in the public surface's Resend-style shape. A sending_access
// key gets 401 restricted_api_key. A key locked to a domain sees and verifies that domain only, and cannot register
// or delete domains.
import Type, { type Static } from 'typebox'
import { cutPage, listObject, pageOf, pageQuery, unknownCursor } from '../../../shared/catalog/pagination'
import { Strict } from '../../../shared/catalog/schemas'
import { validateInput } from '../../../shared/catalog/validate'
import { notFound } from '../../../shared/errors'
import { createDomain, deleteDomain, type Domain, getDomain, listDomains, verifyDomain } from '../../../shared/mail/domains'
import { DomainName, TemplateFields } from '../../../shared/mail/schemas'
import {
  createTemplate, deleteTemplate, getTemplate, listTemplates, placeholders, type Template, updateTemplate,
} from '../../../shared/mail/templates'
import { type MailKeyIdentity, restrictedKey } from './key-auth'

const iso = (date: Date | null) => (date ? date.toISOString() : null)

const Status = (values: readonly string[], description?: string) =>
  Type.Union(values.map((v) => Type.Literal(v)), description ? { description } : {})
const When = (description: string) => Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description })
/** A domain as the public surface answers it (domainOut), Resend's shape. */
export const PublicDomainSchema = Strict({
  object: Type.Literal('domain'), id: Type.String(), name: Type.String(),
  status: Status(['pending', 'verified', 'failed'], 'Only verified domains send'),
  created_at: When('Never null'), checked_at: When('The last verification check'), verified_at: When('When it first verified'),
  records: Type.Array(Strict({
    record: Status(['DKIM', 'SPF', 'Ownership']), type: Type.Literal('TXT'), name: Type.String(), value: Type.String(),
    status: Status(['pending', 'verified', 'failed']),
  }), { description: 'The DNS records to publish' }),
})
/** A template as the public surface answers it (templateOut). */
export const PublicTemplateSchema = Strict({
  object: Type.Literal('template'), id: Type.String(), name: Type.String(), subject: Type.String(), html: Type.String(),
  text: Type.Union([Type.String(), Type.Null()]),
  variables: Type.Array(Type.String(), { description: 'The placeholders the template uses: every one must be given at send time' }),
  created_at: When('Never null'), updated_at: When('Never null'),
})

const domainOut = (d: Domain) => ({
  object: 'domain' as const, id: d.id, name: d.name, status: d.status, created_at: iso(d.createdAt),
  checked_at: iso(d.checkedAt), verified_at: iso(d.verifiedAt), records: d.records,
})
const templateOut = (t: Template) => ({
  object: 'template' as const, id: t.id, name: t.name, subject: t.subject, html: t.html, text: t.text,
  variables: placeholders(t.subject, t.html, t.text), created_at: iso(t.createdAt), updated_at: iso(t.updatedAt),
})

// The platform's one pagination style (shared/catalog/pagination.ts): limit 1..100, after = the last item's id, has_more.
export const DomainPage = Strict(pageQuery('domain'))
export const TemplatePage = Strict(pageQuery('template'))

/** Only full_access keys manage the Mail setup. */
function requireFullAccess(key: MailKeyIdentity): void {
  if (key.scope !== 'full_access') throw restrictedKey('This API key is restricted to sending emails; domains and templates need a full_access key')
}

/** A locked key reaches its own domain only (any other is 404) and may not register or delete domains. */
function domainReachable(key: MailKeyIdentity, id: string): void {
  if (key.domainId !== null && key.domainId !== id) throw notFound('Domain')
}
function unlocked(key: MailKeyIdentity, what: string): void {
  if (key.domainId !== null) throw restrictedKey(`This API key is restricted to one domain and cannot ${what}`)
}

export const DomainBody = Strict({ name: DomainName() })
export const TemplateBody = Strict({ name: TemplateFields.name(), subject: TemplateFields.subject(), html: TemplateFields.html(), text: Type.Optional(TemplateFields.text()) })
export const TemplatePatch = Strict({
  name: Type.Optional(TemplateFields.name()), subject: Type.Optional(TemplateFields.subject()),
  html: Type.Optional(TemplateFields.html()), text: Type.Optional(TemplateFields.text()),
})

export const domains = {
  async create(key: MailKeyIdentity, raw: unknown) {
    requireFullAccess(key)
    unlocked(key, 'register domains')
    const body = validateInput({ body: DomainBody }, { body: raw }).body as Static<typeof DomainBody>
    return domainOut(await createDomain(key.productId, body.name.toLowerCase()))
  },
  async list(key: MailKeyIdentity, rawQuery: Record<string, string>) {
    requireFullAccess(key)
    const page = pageOf(validateInput({ query: DomainPage }, { query: rawQuery }).query as Static<typeof DomainPage>)
    if (key.domainId !== null) {
      // A locked key's list is its one domain: nothing comes after it, and no other domain is a cursor it can name.
      if (page.after !== undefined && page.after !== key.domainId) throw unknownCursor('domain')
      const data = page.after === undefined ? [domainOut(await getDomain(key.productId, key.domainId))] : []
      return { object: 'list' as const, has_more: false, data }
    }
    const { items, has_more } = cutPage(await listDomains(key.productId, page), page)
    return { object: 'list' as const, has_more, data: items.map(domainOut) }
  },
  async get(key: MailKeyIdentity, id: string) {
    requireFullAccess(key)
    domainReachable(key, id)
    return domainOut(await getDomain(key.productId, id))
  },
  async verify(key: MailKeyIdentity, id: string) {
    requireFullAccess(key)
    domainReachable(key, id)
    return domainOut(await verifyDomain(key.productId, id))
  },
  async delete(key: MailKeyIdentity, id: string) {
    requireFullAccess(key)
    unlocked(key, 'delete domains')
    await deleteDomain(key.productId, id)
    return { object: 'domain' as const, id, deleted: true }
  },
}

export const templates = {
  async create(key: MailKeyIdentity, raw: unknown) {
    requireFullAccess(key)
    const body = validateInput({ body: TemplateBody }, { body: raw }).body as Static<typeof TemplateBody>
    return templateOut(await createTemplate(key.productId, body))
  },
  async list(key: MailKeyIdentity, rawQuery: Record<string, string>) {
    requireFullAccess(key)
    const query = validateInput({ query: TemplatePage }, { query: rawQuery }).query as Static<typeof TemplatePage>
    return listObject(query, (page) => listTemplates(key.productId, page), templateOut)
  },
  async get(key: MailKeyIdentity, id: string) {
    requireFullAccess(key)
    return templateOut(await getTemplate(key.productId, id))
  },
  async update(key: MailKeyIdentity, id: string, raw: unknown) {
    requireFullAccess(key)
    const body = validateInput({ body: TemplatePatch }, { body: raw }).body as Static<typeof TemplatePatch>
    return templateOut(await updateTemplate(key.productId, id, body))
  },
  async delete(key: MailKeyIdentity, id: string) {
    requireFullAccess(key)
    await deleteTemplate(key.productId, id)
    return { object: 'template' as const, id, deleted: true }
  },
}
