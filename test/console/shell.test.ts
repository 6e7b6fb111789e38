// The console's frame: served with its security headers, sign-in with the platform login, the product list, the
// areas; and nothing but the catalog's operations behind it.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { call, newProduct, newUser, ok, okResponse, startProcess, type Worker } from '../helpers'
import { expectNoProblems, signIn, useBrowser } from './browser'

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

  test('an unknown asset is a 404 in the platform error body, a repeated fetch with its etag a 304, both with the security headers', async () => {
    const missing = await fetch(`${apiWorker.url}/console/assets/nothing.js`)
    expect(missing.status).toBe(404)
    expect((await missing.json()).error).toBe('not_found')
    const first = await fetch(`${apiWorker.url}/console/assets/app.js`)
    const etag = first.headers.get('etag')!
    const again = await fetch(`${apiWorker.url}/console/assets/app.js`, { headers: { 'if-none-match': etag } })
    expect(again.status).toBe(304)
    // Weak comparison over a list, as browsers and proxies send it.
    const weak = await fetch(`${apiWorker.url}/console/assets/app.js`, { headers: { 'if-none-match': `"other", W/${etag}` } })
    expect(weak.status).toBe(304)
    expect((await fetch(`${apiWorker.url}/console/assets/app.js`, { headers: { 'if-none-match': '"other"' } })).status).toBe(200)
    for (const response of [missing, again, weak]) {
      expect(response.headers.get('content-security-policy')).toContain("frame-ancestors 'none'")
      expect(response.headers.get('content-security-policy')).toContain("require-trusted-types-for 'script'")
      expect(response.headers.get('x-content-type-options')).toBe('nosniff')
      expect(response.headers.get('x-frame-options')).toBe('DENY')
      expect(response.headers.get('referrer-policy')).toBe('no-referrer')
    }
  })
})

describe('in Chromium', () => {
  test('signs in with the platform login, lists the products, opens one, signs out', async () => {
    const owner = await newProduct('Console shell product')
    const second = ok(await call('POST', '/products', { token: owner.token, body: { name: 'Second product' } }), 'second product')
    const console = await browser.open()
    const { page } = console
    const bearers = new Set<string>()
    const calls: string[] = []
    page.on('request', (request) => {
      const bearer = request.headers().authorization
      if (bearer) bearers.add(bearer)
      const url = new URL(request.url())
      if (url.origin === apiWorker.url && !url.pathname.startsWith('/console')) calls.push(`${request.method()} ${url.pathname}`)
    })
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
    // Nothing but the catalog's operations (and the catalog itself) behind the page.
    const openapi = await (await fetch(`${apiWorker.url}/openapi.json`)).json() as { paths: Record<string, Record<string, unknown>> }
    const published = Object.entries(openapi.paths).flatMap(([path, methods]) => Object.keys(methods)
      .map((method) => new RegExp(`^${method.toUpperCase()} ${path.replace(/\{\w+\}/g, '[^/]+')}$`)))
    expect(calls.length).toBeGreaterThan(3)
    for (const made of calls) if (made !== 'GET /openapi.json') expect(published.some((route) => route.test(made))).toBe(true)
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

  test('a view that answers late never draws over the view the reader moved to', async () => {
    const owner = await newProduct('Race product')
    const console = await browser.open()
    const { page } = console
    await signIn(page, owner.email, owner.password)
    await page.click(`[data-product-id="${owner.productId}"]`)
    await page.waitForSelector('.content[data-area="analytics"]')
    let release!: () => void
    const held = new Promise<void>((resolve) => { release = resolve })
    let listAsked!: () => void
    const asked = new Promise<void>((resolve) => { listAsked = resolve })
    await page.route('**/products?**', async (route) => {
      listAsked()
      await held
      await route.continue()
    })
    await page.evaluate(() => { location.hash = '#/products' })
    await asked
    await page.evaluate((hash) => { location.hash = hash }, `#/p/${owner.productId}/mail`)
    await page.waitForSelector('.content[data-area="mail"]')
    const answered = page.waitForResponse('**/products?**')
    release()
    await answered
    // The list's answer landed in a container no longer on the page: the mail view and its header stay.
    await page.waitForFunction(() => document.querySelectorAll('.view').length === 1)
    expect(await page.locator('[data-testid=products]').count()).toBe(0)
    expect(await page.locator('.topbar').count()).toBe(1)
    expectNoProblems(console)
  })

  test('a bookmarked view opens after sign-in; Back to sign-in while signed in keeps the one session', async () => {
    const owner = await newProduct('Bookmarked product')
    const console = await browser.open(`#/p/${owner.productId}/mail`)
    const { page } = console
    const logins: string[] = []
    page.on('request', (request) => { if (new URL(request.url()).pathname === '/auth/login') logins.push(request.url()) })
    await page.waitForSelector('[data-testid=signin]')
    await page.fill('[data-testid=signin] input[name=email]', owner.email)
    await page.fill('[data-testid=signin] input[name=password]', owner.password)
    await page.click('[data-testid=signin] button[type=submit]')
    await page.waitForSelector('.content[data-area="mail"]')
    expect(new URL(page.url()).hash).toBe(`#/p/${owner.productId}/mail`)
    await page.evaluate(() => { location.hash = '#/signin' })
    await page.waitForSelector('[data-testid=products]')
    expect(logins).toHaveLength(1)
    expectNoProblems(console)
  })

  test('a session ended elsewhere sends the page to sign-in, and back to the same view after it', async () => {
    const owner = await newProduct('Expiring product')
    const console = await browser.open()
    const { page } = console
    let bearer: string | undefined
    page.on('request', (request) => { bearer = request.headers().authorization ?? bearer })
    await signIn(page, owner.email, owner.password)
    await page.click(`[data-product-id="${owner.productId}"]`)
    await page.waitForSelector('.content[data-area="analytics"]')
    await okResponse(await fetch(`${apiWorker.url}/auth/logout`, { method: 'POST', headers: { authorization: bearer! } }), 'logout')
    await page.click('.topbar nav a[href$="/mail"]')
    await page.waitForSelector('[data-testid=signin]')
    await page.fill('[data-testid=signin] input[name=email]', owner.email)
    await page.fill('[data-testid=signin] input[name=password]', owner.password)
    await page.click('[data-testid=signin] button[type=submit]')
    await page.waitForSelector('.content[data-area="mail"]')
    // The refused calls of the ended session are the page's only console errors (Chromium logs each 401).
    expect(console.problems.every((problem) => problem.includes('401'))).toBe(true)
  })

  test('a malformed escape in the address is shown, not thrown; the next link still works', async () => {
    const owner = await newProduct('Escape product')
    const console = await browser.open()
    const { page } = console
    await signIn(page, owner.email, owner.password)
    await page.evaluate(() => { location.hash = '#/p/%E0/mail' })
    await page.waitForSelector('[data-testid=product-name]')
    await page.waitForFunction(() => document.querySelector('[data-testid=product-name]')?.textContent !== '…')
    await page.evaluate(() => { location.hash = '#/products' })
    await page.waitForSelector('[data-testid=products]')
    expect(console.problems.filter((problem) => problem.startsWith('pageerror'))).toEqual([])
  })
})
