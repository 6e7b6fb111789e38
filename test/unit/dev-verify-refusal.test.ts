// MAIL_DEV_VERIFY runs only in a development or test environment: every other PLATFORM_ENV, however it is spelled,
// refuses it (shared/config.ts, which every process reads at start-up; the processes themselves are tested in
// test/security/mailer-delivery.test.ts).
import { expect, test } from 'bun:test'
import { devVerifyRefusal } from '../../shared/config'

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
