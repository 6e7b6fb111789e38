// The Mail routes, with a sending key (lmk_): send (with an Idempotency-Key so a retry sends once) and read emails;
// domains and templates need a full_access key.
import type { Transport } from './http.js'
import type { Answer, QueryOf, RequestBody } from './types.js'
import type { WriteOptions } from './realtime.js'

export type SendEmailRequest = RequestBody<'mail_emails_send'>
export type SendEmailResult = Answer<'mail_emails_send'>
export type EmailListQuery = QueryOf<'mail_emails_list'>
export type EmailList = Answer<'mail_emails_list'>
export type Email = Answer<'mail_emails_get'>
export type CreateDomainRequest = RequestBody<'mail_domain_create'>
export type Domain = Answer<'mail_domain_get'>
export type DomainListQuery = QueryOf<'mail_domain_list'>
export type DomainList = Answer<'mail_domain_list'>
export type CreateTemplateRequest = RequestBody<'mail_template_create'>
export type UpdateTemplateRequest = RequestBody<'mail_template_update'>
export type Template = Answer<'mail_template_get'>
export type TemplateListQuery = QueryOf<'mail_template_list'>
export type TemplateList = Answer<'mail_template_list'>

export function mail(transport: Transport, productId: string, apiKey: string | undefined) {
  const key = { value: apiKey, option: 'mailKey', in: 'header' } as const
  const base = `/${encodeURIComponent(productId)}/mail`
  const one = (kind: string, id: string) => `${base}/${kind}/${encodeURIComponent(id)}`
  const get = <T>(path: string, query?: Record<string, string | number | undefined>) => transport.request<T>({ method: 'GET', path, query, key })
  const send = <T>(method: 'POST' | 'PATCH' | 'DELETE', path: string, body?: unknown) => transport.request<T>({ method, path, body, key })

  return {
    emails: {
      /** Queues an email; retried safely (the Idempotency-Key makes a repeat answer the first send). */
      send: (body: SendEmailRequest, options: WriteOptions = {}) => transport.request<SendEmailResult>({
        method: 'POST', path: `${base}/emails`, body, key, idempotencyKey: options.idempotencyKey ?? crypto.randomUUID(),
      }),
      list: (query: EmailListQuery = {}) => get<EmailList>(`${base}/emails`, query),
      get: (id: string) => get<Email>(one('emails', id)),
    },
    domains: {
      create: (body: CreateDomainRequest) => send<Domain>('POST', `${base}/domains`, body),
      list: (query: DomainListQuery = {}) => get<DomainList>(`${base}/domains`, query),
      get: (id: string) => get<Domain>(one('domains', id)),
      /** Checks the domain's DNS records now. */
      verify: (id: string) => send<Domain>('POST', `${one('domains', id)}/verify`),
      remove: (id: string) => send<Answer<'mail_domain_delete'>>('DELETE', one('domains', id)),
    },
    templates: {
      create: (body: CreateTemplateRequest) => send<Template>('POST', `${base}/templates`, body),
      list: (query: TemplateListQuery = {}) => get<TemplateList>(`${base}/templates`, query),
      get: (id: string) => get<Template>(one('templates', id)),
      /** Only the fields given change. */
      update: (id: string, body: UpdateTemplateRequest) => send<Template>('PATCH', one('templates', id), body),
      remove: (id: string) => send<Answer<'mail_template_delete'>>('DELETE', one('templates', id)),
    },
  }
}
