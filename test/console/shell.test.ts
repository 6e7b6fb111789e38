// The console's frame: served with its security headers, sign-in with the platform login, the product list, the
// areas; and nothing but the catalog's operations behind it.
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { call, eventually, newProduct, newUser, ok, okResponse, startProcess, type Worker } from '../helpers'
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

  test('a wrong password shows the API error; the token is never written to storage or a cookie the page can read', async () => {
    const user = await newUser()
    const console = await browser.open()
    const { page } = console
    await page.fill('[data-testid=signin] input[name=email]', user.email)
    await page.fill('[data-testid=signin] input[name=password]', 'not the password')
    await page.click('[data-testid=signin] button[type=submit]')
    await page.waitForSelector('[data-testid=signin] .error:not(:empty)')
    expect(await page.textContent('[data-testid=signin] .error')).toMatch(/password/i)
    await signIn(page, user.email, user.password)
    // Storage holds the session's binding (docs/console.md), never the token.
    const stored = await page.evaluate(() => ({ keys: Object.keys(localStorage), values: Object.values(localStorage).join(' '), session: sessionStorage.length, cookie: document.cookie }))
    expect(stored).toEqual({ keys: ['console.session-binding'], values: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/), session: 0, cookie: '' })
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

describe('the session across a reload', () => {
  const restoreUrl = () => `${apiWorker.url}/console/session/restore`
  const BINDING = 'b'.repeat(43)
  const own = () => ({ 'x-console': '1', origin: apiWorker.url, 'x-console-binding': BINDING })

  /** The parked cookie of a signed-in page, as the browser holds it. */
  async function sessionCookie(page: import('playwright-core').Page) {
    return (await page.context().cookies(`${apiWorker.url}/console/session`)).find((cookie) => cookie.name === 'console_session')
  }

  test('a reload keeps the user signed in on the same view; sign-out then reload asks for sign-in', async () => {
    const owner = await newProduct('Reload product')
    const console = await browser.open()
    const { page } = console
    const login = page.waitForResponse((response) => new URL(response.url()).pathname === '/auth/login')
    await signIn(page, owner.email, owner.password)
    const session = await (await login).json() as { token: string; expiresAt: string }
    await page.click(`[data-product-id="${owner.productId}"]`)
    await page.click('.topbar nav a[href$="/mail"]')
    await page.waitForSelector('.content[data-area="mail"]')
    const cookie = (await sessionCookie(page))!
    // HttpOnly (no script reads it), SameSite=Strict, sent to the session's own path and nowhere else.
    expect({ httpOnly: cookie.httpOnly, sameSite: cookie.sameSite, path: cookie.path }).toEqual({ httpOnly: true, sameSite: 'Strict', path: '/console/session' })
    // The page's own session, kept no longer than the session lives.
    const binding = await page.evaluate(() => localStorage.getItem('console.session-binding'))
    expect(cookie.value).toBe(`${session.token}.${binding}`)
    expect(Math.abs(cookie.expires - Date.parse(session.expiresAt) / 1000)).toBeLessThanOrEqual(2)
    expect(await page.evaluate(() => document.cookie)).toBe('')
    await page.reload()
    await page.waitForSelector('.content[data-area="mail"]')
    expect(new URL(page.url()).hash).toBe(`#/p/${owner.productId}/mail`)
    await page.waitForFunction(() => document.querySelector('[data-testid=product-name]')?.textContent === 'Reload product')
    await page.click('text=Sign out')
    await page.waitForSelector('[data-testid=signin]')
    expect(await sessionCookie(page)).toBeUndefined()
    // The parked token ended on the server too.
    expect((await fetch(`${apiWorker.url}/auth/me`, { headers: { authorization: `Bearer ${session.token}` } })).status).toBe(401)
    await page.reload()
    await page.waitForSelector('[data-testid=signin]')
    expect(new URL(page.url()).hash).toBe('#/signin')
    expectNoProblems(console)
  })

  test('a session ended elsewhere is not restored by a reload, and its cookie is cleared', async () => {
    const owner = await newProduct('Ended product')
    const console = await browser.open()
    const { page } = console
    await signIn(page, owner.email, owner.password)
    const cookie = (await sessionCookie(page))!
    await okResponse(await fetch(`${apiWorker.url}/auth/logout`, { method: 'POST', headers: { authorization: `Bearer ${cookie.value.split('.')[0]}` } }), 'logout')
    await page.reload()
    await page.waitForSelector('[data-testid=signin]')
    expect(await sessionCookie(page)).toBeUndefined()
    expectNoProblems(console)
  })

  test('the cookie is a credential nowhere but the restore, and the restore answers only the console page itself', async () => {
    const owner = await newProduct('Cookie product')
    const cookie = `console_session=${owner.token}.${BINDING}`
    // Kept only for a live session token of this page, and only with the page's own headers.
    expect((await fetch(`${apiWorker.url}/console/session`, { method: 'POST', headers: { ...own(), authorization: 'Bearer pls_not-a-session' } })).status).toBe(401)
    expect((await fetch(`${apiWorker.url}/console/session`, { method: 'POST', headers: { 'x-console': '1', origin: 'http://127.0.0.1:1', authorization: `Bearer ${owner.token}` } })).status).toBe(403)
    const kept = await fetch(`${apiWorker.url}/console/session`, { method: 'POST', headers: { ...own(), authorization: `Bearer ${owner.token}` } })
    expect(kept.status).toBe(204)
    expect(kept.headers.get('set-cookie')).toMatch(/^console_session=pls_[^;]+\.b{43}; Path=\/console\/session; Max-Age=\d+; HttpOnly; SameSite=Strict$/)
    // Kept only with the page's binding, a value its own origin's storage holds (a planted cookie cannot match it).
    const unbound = await fetch(`${apiWorker.url}/console/session`, { method: 'POST', headers: { ...own(), 'x-console-binding': 'short', authorization: `Bearer ${owner.token}` } })
    expect(unbound.status).toBe(400)
    expect((await unbound.json()).fields).toEqual([{ path: '/header/x-console-binding', message: expect.any(String) }])
    // Any API route: the cookie alone is no session.
    for (const path of ['/auth/me', '/products', `/products/${owner.productId}`]) {
      const response = await fetch(`${apiWorker.url}${path}`, { headers: { cookie, origin: apiWorker.url } })
      expect(response.status).toBe(401)
      expect(JSON.stringify(await response.json())).not.toContain(owner.productId)
    }
    const restored = await fetch(restoreUrl(), { method: 'POST', headers: { ...own(), cookie } })
    expect(restored.status).toBe(200)
    expect((await restored.json()).token).toBe(owner.token)
    // A cookie another site planted (its own session, its own binding) restores nothing for this page; beside the
    // page's own cookie it is passed over, whichever comes first.
    const stranger = await newProduct('Planted')
    const planted = `console_session=${stranger.token}.${'p'.repeat(43)}`
    const alone = await fetch(restoreUrl(), { method: 'POST', headers: { ...own(), cookie: planted } })
    expect(alone.status).toBe(204)
    expect(await alone.text()).not.toContain('pls_')
    for (const both of [`${planted}; ${cookie}`, `${cookie}; ${planted}`]) {
      const answer = await fetch(restoreUrl(), { method: 'POST', headers: { ...own(), cookie: both } })
      expect((await answer.json()).token).toBe(owner.token)
    }
    // Without the binding header nothing is restored either.
    expect((await fetch(restoreUrl(), { method: 'POST', headers: { 'x-console': '1', origin: apiWorker.url, cookie } })).status).toBe(204)
    const refusals: [string, Record<string, string>, RegExp][] = [
      ['no console header', { origin: apiWorker.url, cookie }, /x-console/],
      ['no Origin', { 'x-console': '1', cookie }, /Origin/],
      ['another origin', { 'x-console': '1', origin: 'http://127.0.0.1:1', cookie }, /not http:\/\/127\.0\.0\.1:1/],
      ['a sibling site', { ...own(), 'sec-fetch-site': 'same-site', cookie }, /Sec-Fetch-Site: same-site/],
      // Quoted bounded, whatever was sent.
      ['a huge origin', { 'x-console': '1', origin: `http://${'a'.repeat(5000)}`, cookie }, /not http:\/\/a{93}…$/],
    ]
    for (const [what, headers, message] of refusals) {
      const response = await fetch(restoreUrl(), { method: 'POST', headers })
      const text = await response.text()
      expect({ what, status: response.status }).toEqual({ what, status: 403 })
      expect(JSON.parse(text)).toMatchObject({ error: 'forbidden', message: expect.stringMatching(message) })
      expect(text).not.toContain('pls_')
      expect(response.headers.get('set-cookie')).toBeNull()
    }
    // GET (a link, an <img>) is no way in either.
    expect((await fetch(restoreUrl(), { headers: { ...own(), cookie } })).status).toBe(404)
  })

  test("a cookie another site planted (a sibling subdomain, another port) never signs the reader into that site's account", async () => {
    const stranger = await newProduct('Stranger product')
    const owner = await newProduct('Own product')
    const console = await browser.open()
    const { page } = console
    const host = new URL(apiWorker.url).hostname
    // As a page of another port of this host could (cookies ignore ports), on a longer path so it is sent first.
    await page.context().addCookies([{ name: 'console_session', value: `${stranger.token}.${'p'.repeat(43)}`, domain: host,
      path: '/console/session/restore', httpOnly: false, sameSite: 'Strict', expires: Date.now() / 1000 + 3600 }])
    await page.reload()
    await page.waitForSelector('[data-testid=signin]')
    await signIn(page, owner.email, owner.password)
    await page.reload()
    await page.waitForSelector('[data-testid=products]')
    expect(await page.locator(`[data-product-id="${owner.productId}"]`).count()).toBe(1)
    expect(await page.locator(`[data-product-id="${stranger.productId}"]`).count()).toBe(0)
    expectNoProblems(console)
  })

  test('a page of another origin, with the cookie in the same browser, gets no token: by fetch with credentials nor by a form', async () => {
    const owner = await newProduct('Targeted product')
    const console = await browser.open()
    const { page } = console
    await signIn(page, owner.email, owner.password)
    const token = (await sessionCookie(page))!.value
    // Another port of the same host: another origin but the same site, so SameSite=Strict alone would let the cookie go.
    const api = apiWorker.url
    const hostile = Bun.serve({
      port: 0,
      hostname: '127.0.0.1',
      fetch(request) {
        const script = new URL(request.url).pathname === '/form'
          ? `<form method="post" action="${api}/console/session/restore"></form><script>document.forms[0].submit()</script>`
          : `<pre id="result"></pre><script>
              (async () => {
                const tries = [
                  { method: 'POST', credentials: 'include', headers: { 'x-console': '1' } },
                  { method: 'POST', credentials: 'include' },
                  { method: 'POST', credentials: 'include', mode: 'no-cors' },
                ]
                const out = []
                for (const init of tries) {
                  try {
                    const response = await fetch('${api}/console/session/restore', init)
                    out.push(response.type + ' ' + response.status + ' ' + await response.text())
                  } catch (error) { out.push('refused') }
                }
                document.getElementById('result').textContent = JSON.stringify(out)
              })()
            </script>`
        return new Response(`<!doctype html><html><body>${script}</body></html>`, { headers: { 'content-type': 'text/html' } })
      },
    })
    try {
      // What the browser sent and the api answered, read from Chromium's network log (a response the page may not
      // read is still logged there): each POST to the restore, whether it carried the cookie, its status.
      const cdp = await page.context().newCDPSession(page)
      await cdp.send('Network.enable')
      const posts = new Set<string>()
      const wire = new Map<string, { cookie?: boolean; status?: number }>()
      const entry = (id: string) => wire.get(id) ?? wire.set(id, {}).get(id)!
      cdp.on('Network.requestWillBeSent', (event) => {
        if (event.request.method === 'POST' && event.request.url === `${api}/console/session/restore`) posts.add(event.requestId)
      })
      cdp.on('Network.requestWillBeSentExtraInfo', (event) => {
        entry(event.requestId).cookie = String(event.headers.cookie ?? event.headers.Cookie ?? '').includes(token)
      })
      cdp.on('Network.responseReceivedExtraInfo', (event) => { entry(event.requestId).status = event.statusCode })
      await page.goto(`http://127.0.0.1:${hostile.port}/fetch`)
      await page.waitForFunction(() => document.getElementById('result')?.textContent)
      const result = JSON.parse((await page.textContent('#result'))!) as string[]
      // Unreadable (no credentials are ever allowed across origins), and opaque without CORS: nothing reaches the page.
      expect(result).toEqual(['refused', 'refused', 'opaque 0 '])
      // The preflighted one is never sent (the preflight allows no credentials); the two simple ones were, with the
      // cookie (same site), and the api refused each itself.
      const sent = await eventually(() => {
        const answered = [...posts].flatMap((id) => (wire.get(id)?.status === undefined ? [] : [wire.get(id)]))
        return answered.length === 2 && answered
      }, 10_000, 'the two posts answered')
      expect(posts.size).toBe(3)
      expect(sent).toEqual([{ cookie: true, status: 403 }, { cookie: true, status: 403 }])
      const posted = page.waitForResponse((response) => response.url() === `${api}/console/session/restore`)
      await page.goto(`http://127.0.0.1:${hostile.port}/form`)
      expect((await posted).status()).toBe(403)
      await page.waitForURL(`${api}/console/session/restore`)
      expect(await page.textContent('body')).not.toContain('pls_')
      // The session itself is untouched: the console page still restores it.
      await page.goto(`${api}/console#/products`)
      await page.waitForSelector('[data-testid=products]')
    } finally {
      hostile.stop(true)
    }
  })
})
