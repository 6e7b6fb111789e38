// MAIL_DEV_VERIFY and WEBHOOK_ALLOW_PRIVATE_URLS run only in a development or test environment: every other
// PLATFORM_ENV, however it is spelled, refuses them (shared/config.ts, which every process reads at start-up; the
// mail processes themselves are tested in test/security/mailer-delivery.test.ts).
import { expect, test } from 'bun:test'
import { devVerifyRefusal, privateWebhooksRefusal } from '../../shared/config'

test('refused in every environment that is not development, dev, test or local, whatever its case or spacing', () => {
  for (const environment of ['production', 'Production', 'PRODUCTION', ' production', 'production ', '\tproduction\n', 'prod',
    'Prod', 'prd', 'live', 'staging', 'preprod', 'eu-production', 'production-eu', 'develop ment', 'testing', '']) {
    const refusal = devVerifyRefusal(environment, true)
    expect(refusal, JSON.stringify(environment)).toStartWith(`MAIL_DEV_VERIFY is refused when PLATFORM_ENV=${JSON.stringify(environment)}: it is allowed only when PLATFORM_ENV is development, dev, test, local`)
  }
})

test('allowed in development, dev, test and local, in any case, trimmed; and never refused when it is off', () => {
  for (const environment of ['development', 'Development', ' DEVELOPMENT ', 'dev', 'Dev', 'test', 'TEST', 'local', ' Local\t']) {
    expect(devVerifyRefusal(environment, true), JSON.stringify(environment)).toBeUndefined()
  }
  for (const environment of ['production', 'Production', 'prod', 'staging']) expect(devVerifyRefusal(environment, false)).toBeUndefined()
})

test('WEBHOOK_ALLOW_PRIVATE_URLS follows the same rule: refused outside development, dev, test and local', () => {
  for (const environment of ['production', ' Production', 'prod', 'staging', '']) {
    expect(privateWebhooksRefusal(environment, true), JSON.stringify(environment)).toStartWith(`WEBHOOK_ALLOW_PRIVATE_URLS is refused when PLATFORM_ENV=${JSON.stringify(environment)}: it is allowed only when PLATFORM_ENV is development, dev, test, local`)
  }
  for (const environment of ['development', ' TEST ', 'local']) expect(privateWebhooksRefusal(environment, true)).toBeUndefined()
  expect(privateWebhooksRefusal('production', false)).toBeUndefined()
})

test('a process started with PLATFORM_ENV=production and WEBHOOK_ALLOW_PRIVATE_URLS=1 exits, saying why', async () => {
  const child = Bun.spawn(['bun', '-e', "await import('./shared/config')"], {
    cwd: `${import.meta.dir}/../..`, env: { ...process.env, PLATFORM_ENV: 'production', WEBHOOK_ALLOW_PRIVATE_URLS: '1', MAIL_DEV_VERIFY: '0' },
    stderr: 'pipe', stdout: 'ignore',
  })
  expect(await child.exited).not.toBe(0)
  expect(await new Response(child.stderr).text()).toContain('WEBHOOK_ALLOW_PRIVATE_URLS is refused when PLATFORM_ENV="production"')
})
