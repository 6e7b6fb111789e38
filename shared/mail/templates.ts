// Email templates: a subject, html and optional text with `{{variable}}` placeholders, filled in at send time. Values
// are HTML-escaped in the html (a variable can never inject markup) and used as they are in the subject and text.
import { type PageRequest, PAGE_DEFAULT } from '../catalog/pagination'
import { insertUnderCeiling } from '../db/ceiling'
import { sql } from '../db/client'
import { keysetPage, NEWEST_FIRST } from '../db/keyset'
import { conflict, notFound, unprocessable } from '../errors'
import { isUuid } from '../ids'
import { isPgError } from '../db/error-codes'

export interface Template {
  id: string
  name: string
  subject: string
  html: string
  text: string | null
  createdAt: Date
  updatedAt: Date
}

export interface TemplateInput {
  name: string
  subject: string
  html: string
  text?: string | null
}

const COLUMNS = sql`id, name, subject, html, text, created_at, updated_at`
const templateOut = (row: Record<string, any>): Template => ({
  id: row.id, name: row.name, subject: row.subject, html: row.html, text: row.text, createdAt: row.created_at, updatedAt: row.updated_at,
})
const duplicate = (name: string) => conflict(`A template named ${name} already exists in this product`, [{ path: '/body/name', message: 'is already used by another template' }])

export async function createTemplate(productId: string, input: TemplateInput): Promise<Template> {
  const count = (q: typeof sql) => q<{ n: number }[]>`select count(*)::int as n from mail_templates where product_id = ${productId}`
  try {
    const [row] = await insertUnderCeiling(productId, 'mailTemplates', count, (tx) => tx`
      insert into mail_templates (product_id, name, subject, html, text)
      values (${productId}, ${input.name}, ${input.subject}, ${input.html}, ${input.text ?? null})
      returning ${COLUMNS}`)
    return templateOut(row!)
  } catch (error) {
    if (isPgError(error, 'uniqueViolation')) throw duplicate(input.name)
    throw error
  }
}

/** Newest first; at most `page.limit + 1` rows (the extra one says more follow). */
export async function listTemplates(productId: string, page: PageRequest = { limit: PAGE_DEFAULT }): Promise<Template[]> {
  const rows = await keysetPage({
    what: 'template', order: NEWEST_FIRST,
    cursor: (after) => sql`from mail_templates where id = ${after} and product_id = ${productId}`,
    rows: sql`select ${COLUMNS} from mail_templates where product_id = ${productId}`,
  }, page)
  return rows.map(templateOut)
}

/** One template of the product; another product's, an unknown id and a malformed id are all 404. */
export async function getTemplate(productId: string, id: string): Promise<Template> {
  const template = await findTemplate(productId, id)
  if (!template) throw notFound('Template')
  return template
}

/** A template of the product by id, or null (a malformed id too). */
export async function findTemplate(productId: string, id: string): Promise<Template | null> {
  if (!isUuid(id)) return null
  const [row] = await sql`select ${COLUMNS} from mail_templates where id = ${id} and product_id = ${productId}`
  return row ? templateOut(row) : null
}

/** Changes only the supplied fields. */
export async function updateTemplate(productId: string, id: string, input: Partial<TemplateInput>): Promise<Template> {
  if (!isUuid(id)) throw notFound('Template')
  try {
    const [row] = await sql`
      update mail_templates set
        name = coalesce(${input.name ?? null}, name), subject = coalesce(${input.subject ?? null}, subject),
        html = coalesce(${input.html ?? null}, html),
        text = case when ${input.text !== undefined} then ${input.text ?? null} else text end,
        updated_at = now()
      where id = ${id} and product_id = ${productId}
      returning ${COLUMNS}`
    if (!row) throw notFound('Template')
    return templateOut(row)
  } catch (error) {
    if (isPgError(error, 'uniqueViolation')) throw duplicate(input.name!)
    throw error
  }
}

export async function deleteTemplate(productId: string, id: string): Promise<void> {
  if (!isUuid(id)) throw notFound('Template')
  const [row] = await sql`delete from mail_templates where id = ${id} and product_id = ${productId} returning id`
  if (!row) throw notFound('Template')
}

const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g

const escapeHtml = (value: string) =>
  value.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;')

/** The names of the placeholders in `texts`, each once, in order of first appearance. */
export function placeholders(...texts: (string | null | undefined)[]): string[] {
  const names = new Set<string>()
  for (const text of texts) for (const match of (text ?? '').matchAll(PLACEHOLDER)) names.add(match[1]!)
  return [...names]
}

export type Variables = Record<string, string | number | boolean>

/**
 * Fills a template in. Every placeholder needs a variable: a missing one is a 422 naming it
 * (`/body/template/variables/<name>`). Variables no placeholder uses are ignored.
 */
export function renderTemplate(template: Pick<Template, 'subject' | 'html' | 'text'>, variables: Variables = {}) {
  const missing = placeholders(template.subject, template.html, template.text).filter((name) => !Object.hasOwn(variables, name))
  if (missing.length) {
    throw unprocessable(`The template needs ${missing.map((n) => `"${n}"`).join(', ')}: give ${missing.length === 1 ? 'it' : 'them'} in template.variables`,
      missing.map((name) => ({ path: `/body/template/variables/${name}`, message: 'is used by the template and missing' })))
  }
  const fill = (text: string, as: (value: string) => string) => text.replace(PLACEHOLDER, (_, name: string) => as(String(variables[name])))
  return {
    // A subject is one header line: a value's line breaks become spaces.
    subject: fill(template.subject, (v) => v.replace(/[\r\n]+/g, ' ')),
    html: fill(template.html, escapeHtml),
    text: template.text === null ? null : fill(template.text, (v) => v),
  }
}
