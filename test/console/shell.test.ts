// The console's frame: served with its security headers, sign-in with the platform login, the product list, the
// areas; and nothing but the catalog's operations behind it.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { call, newProduct, newUser, ok, startProcess, type Worker } from '../helpers'
import { expectNoProblems, openArea, signIn, useBrowser } from './browser'

let apiWorker: Worker
beforeAll(async () => {
  apiWorker = await startProcess('api')
})
afterAll(async () => {
  await apiWorker?.stop()
})
const browser = useBrowser(() => apiWorker.url)

describe('serving', () => {
  test('the page, its script and styles carry a Content-Security-Policy without inline code, and no cookie', async () => {
    for (const path of ['/console', '/console/assets/app.js', '/console/assets/console.css', '/console/assets/uplot.css']) {
      const response = await fetch(`${apiWorker.url}${path}`)
      expect(response.status).toBe(200)
      const policy = response.headers.get('content-security-policy')!
      expect(policy).toContain("script-src 'self'")
      expect(policy).toContain("style-src 'self'")
      expect(policy).toContain("frame-ancestors 'none'")
      expect(policy).not.toContain('unsafe-inline')
      expect(policy).not.toContain('unsafe-eval')
      expect(response.headers.get('x-content-type-options')).toBe('nosniff')
      expect(response.headers.get('set-cookie')).toBeNull()
    }
    const html = await (await fetch(`${apiWorker.url}/console`)).text()
    // Every script is a file of this origin: no inline <script> body, no on*= handler attribute.
    expect(html).toMatch(/<script type="module" src="\/console\/assets\/app\.js"><\/script>/)
    expect(html.match(/<script[^>]*>[^<]+<\/script>/g)).toBeNull()
    expect(html).not.toMatch(/\son[a-z]+=/i)
  })

  test('an unknown asset is a 404 in the platform error body; a repeated fetch with its etag is a 304', async () => {
    const missing = await fetch(`${apiWorker.url}/console/assets/nothing.js`)
    expect(missing.status).toBe(404)
    expect((await missing.json()).error).toBe('not_found')
    const first = await fetch(`${apiWorker.url}/console/assets/app.js`)
    const again = await fetch(`${apiWorker.url}/console/assets/app.js`, { headers: { 'if-none-match': first.headers.get('etag')! } })
    expect(again.status).toBe(304)
  })
})

describe('in Chromium', () => {
  test('signs in with the platform login, lists the products, opens one, signs out', async () => {
    const owner = await newProduct('Console shell product')
    const second = ok(await call('POST', '/products', { token: owner.token, body: { name: 'Second product' } }), 'second product')
    const console = await browser.open()
    const { page } = console
    const bearers = new Set<string>()
    page.on('request', (request) => { const bearer = request.headers().authorization; if (bearer) bearers.add(bearer) })
    await signIn(page, owner.email, owner.password)
    const names = await page.locator('[data-testid=products] li a').allTextContents()
    expect(names.sort()).toEqual(['Console shell product', 'Second product'])
    await page.click(`[data-product-id="${second.body.id}"]`)
    await page.waitForSelector('.content[data-area="analytics"]')
    await page.waitForFunction(() => document.querySelector('[data-testid=product-name]')?.textContent !== '…')
    expect(await page.textContent('[data-testid=product-name]')).toBe('Second product')
    await page.click('.topbar nav a[href$="/mail"]')
    await page.waitForSelector('.content[data-area="mail"]')
    expect(page.url()).toContain(`#/p/${second.body.id}/mail`)
    await page.click('text=Sign out')
    await page.waitForSelector('[data-testid=signin]')
    // The page's session (its own login, not the sign-up's) ended on the server too, not only in the page.
    expect([...bearers]).toHaveLength(1)
    const me = await fetch(`${apiWorker.url}/auth/me`, { headers: { authorization: [...bearers][0]! } })
    expect(me.status).toBe(401)
    expect((await fetch(`${apiWorker.url}/auth/me`, { headers: { authorization: `Bearer ${owner.token}` } })).status).toBe(200)
    expectNoProblems(console)
  })

  test('a wrong password shows the API error; the token is never written to storage or a cookie', async () => {
    const user = await newUser()
    const console = await browser.open()
    const { page } = console
    await page.fill('[data-testid=signin] input[name=email]', user.email)
    await page.fill('[data-testid=signin] input[name=password]', 'not the password')
    await page.click('[data-testid=signin] button[type=submit]')
    await page.waitForSelector('[data-testid=signin] .error:not(:empty)')
    expect(await page.textContent('[data-testid=signin] .error')).toMatch(/password/i)
    await signIn(page, user.email, user.password)
    const stored = await page.evaluate(() => ({ local: localStorage.length, session: sessionStorage.length, cookie: document.cookie }))
    expect(stored).toEqual({ local: 0, session: 0, cookie: '' })
    // A reload forgets the in-memory session: back to sign-in.
    await page.reload()
    await page.waitForSelector('[data-testid=signin]')
    expect(new URL(page.url()).hash).toBe('#/signin')
  })

  test("another organization's product id in the address shows the API's 404, not its data", async () => {
    const owner = await newProduct('Hidden product')
    const stranger = await newUser()
    const console = await browser.open()
    const { page } = console
    await signIn(page, stranger.email, stranger.password)
    await page.evaluate((hash) => { location.hash = hash }, `#/p/${owner.productId}/analytics`)
    await page.waitForFunction(() => document.querySelector('[data-testid=product-name]')?.textContent !== '…')
    expect(await page.textContent('[data-testid=product-name]')).toMatch(/not found/i)
    expect(await page.textContent('body')).not.toContain('Hidden product')
  })
})
