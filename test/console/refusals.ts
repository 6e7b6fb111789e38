// The requests the platform refused while a test drove a page, and the console errors that are only the browser's
// notes of them. Chromium logs every 4xx/5xx resource as a console error; its wording and count are Chromium's, so a
// test checks instead that each such error points at a response the test expected to be refused.
import { expect } from 'bun:test'
import type { Page } from 'playwright-core'
import type { ConsolePage } from './browser'

export interface Refusal { method: string; status: number; path: string }

export function watchRefusals(page: Page) {
  const refused: (Refusal & { url: string })[] = []
  const consoleErrors: { text: string; url: string }[] = []
  page.on('response', (response) => {
    if (response.status() < 400) return
    const url = response.url()
    refused.push({ method: response.request().method(), status: response.status(), path: new URL(url).pathname, url })
  })
  page.on('console', (message) => {
    if (message.type() === 'error') consoleErrors.push({ text: message.text(), url: message.location().url })
  })
  return {
    refused,
    /**
     * The page's refused requests are exactly `expected` (in order), and every problem it raised is a console error
     * located at one of them: no page error, no CSP report, no error of the console's own.
     */
    expectOnly(console: ConsolePage, expected: Refusal[]): void {
      expect(refused.map(({ method, status, path }) => ({ method, status, path }))).toEqual(expected)
      const urls = new Set(refused.map((r) => r.url))
      const unexplained = consoleErrors.filter((error) => !urls.has(error.url))
      expect(unexplained).toEqual([])
      expect(console.problems).toHaveLength(consoleErrors.length) // nothing but those console errors
    },
  }
}
