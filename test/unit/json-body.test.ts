// JSON bodies: what JSON.parse would accept but the platform refuses, each with a 400 naming where.
import { describe, expect, test } from 'bun:test'
import { ApiError } from '../../shared/errors'
import { MAX_JSON_DEPTH, parseJson } from '../../shared/http/body'

const bytes = (text: string) => new TextEncoder().encode(text)

function refusal(text: string): ApiError {
  try {
    parseJson(bytes(text))
  } catch (error) {
    if (error instanceof ApiError) return error
    throw error
  }
  throw new Error(`accepted: ${text}`)
}

describe('integers beyond 2^53 - 1', () => {
  test('are refused with 400 naming the field by JSON pointer, instead of being rounded', () => {
    const error = refusal('{"a":{"b/c~":[1,2,9007199254740993]}}')
    expect(error.status).toBe(400)
    expect(error.code).toBe('validation_failed')
    expect(error.body().fields).toEqual([{ path: '/body/a/b~1c~0/2', message: expect.stringContaining('2^53') }])
  })

  test('negative ones and ones after escaped keys are found too', () => {
    expect(refusal('[0,-9007199254740992]').body().fields![0]!.path).toBe('/body/1')
    expect(refusal('{"k\\"q":[0,{"z":99999999999999999999}]}').body().fields![0]!.path).toBe('/body/k"q/1/z')
  })

  test('the largest exact integers, decimals and digits inside strings pass unchanged', () => {
    expect(parseJson(bytes('[9007199254740991,-9007199254740991]'))).toEqual([9007199254740991, -9007199254740991])
    // biome-ignore lint/correctness/noPrecisionLoss: the double that JSON.parse makes of the decimal is the expected value
    expect(parseJson(bytes('{"s":"12345678901234567890","d":1.2345678901234567890e5}'))).toEqual({ s: '12345678901234567890', d: 123456.78901234568 })
  })
})

describe('nesting', () => {
  test(`deeper than ${MAX_JSON_DEPTH} levels is refused; exactly ${MAX_JSON_DEPTH} passes`, () => {
    expect(refusal('['.repeat(MAX_JSON_DEPTH + 1) + ']'.repeat(MAX_JSON_DEPTH + 1)).code).toBe('invalid_json')
    expect(parseJson(bytes('['.repeat(MAX_JSON_DEPTH) + ']'.repeat(MAX_JSON_DEPTH)))).toBeArray()
  })

  test('brackets inside strings do not count', () => {
    expect(parseJson(bytes(JSON.stringify({ s: '['.repeat(500) })))).toEqual({ s: '['.repeat(500) })
  })
})

test('invalid JSON is 400 invalid_json', () => {
  expect(refusal('[1,,2]').code).toBe('invalid_json')
})
