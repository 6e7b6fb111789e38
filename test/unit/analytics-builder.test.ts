// The console's insight builder as data (services/api/console/app/views/analytics/query.ts): what each typed filter
// value is sent as, the query and funnel made from a form and back, what a saved query keeps that the form does not
// show, and the slug a new dashboard's name suggests. No browser, no services.
import { expect, test } from 'bun:test'
import { slugOf } from '../../services/api/console/app/views/analytics/dashboards'
import {
  filterOf, funnelDraftOf, funnelOf, keepUnshown, metricDraftOf, metricQueryOf, summaryOf,
} from '../../services/api/console/app/views/analytics/query'

test('a filter value is sent as the operator takes it: none, a list, a number when it reads as one, else the text', () => {
  expect(filterOf({ field: ' properties.plan ', op: 'set', value: 'ignored' })).toEqual({ field: 'properties.plan', op: 'set' })
  expect(filterOf({ field: 'event', op: 'notSet', value: '' })).toEqual({ field: 'event', op: 'notSet' })
  expect(filterOf({ field: 'event', op: 'in', value: ' signup, , purchase ,' })).toEqual({ field: 'event', op: 'in', value: ['signup', 'purchase'] })
  expect(filterOf({ field: 'properties.amount', op: 'gte', value: ' 10.5 ' })).toEqual({ field: 'properties.amount', op: 'gte', value: 10.5 })
  // Not a number: sent as typed, and the API says a comparison of it never matches (rather than the page refusing).
  expect(filterOf({ field: 'properties.amount', op: 'lt', value: 'ten' })).toEqual({ field: 'properties.amount', op: 'lt', value: 'ten' })
  expect(filterOf({ field: 'properties.amount', op: 'gt', value: '' })).toEqual({ field: 'properties.amount', op: 'gt', value: '' })
  // equals compares text: a value that looks like a number stays the text typed.
  expect(filterOf({ field: 'properties.code', op: 'equals', value: '007' })).toEqual({ field: 'properties.code', op: 'equals', value: '007' })
})

test('a metric query from the form: blank dimensions dropped, a time zone only with a bucket, no empty lists', () => {
  const draft = { entity: 'events', metrics: ['count'], dimensions: [' properties.plan', ''], filters: [], bucket: '' as const, timezone: 'Europe/Berlin', range: { from: '-7d' } }
  expect(metricQueryOf(draft)).toEqual({ entity: 'events', metrics: ['count'], dimensions: ['properties.plan'], range: { from: '-7d' } })
  expect(metricQueryOf({ ...draft, dimensions: [], bucket: 'day', timezone: ' ' })).toEqual({ entity: 'events', metrics: ['count'], range: { from: '-7d' }, bucket: 'day', timezone: 'UTC' })
  const saved = {
    entity: 'events', metrics: ['count', 'identities'], dimensions: ['event'], range: { from: '2026-11-01T00:00:00Z', to: '2026-11-08T00:00:00Z' },
    bucket: 'week' as const, timezone: 'Asia/Kolkata', filters: [{ field: 'properties.amount', op: 'gte' as const, value: 10 }, { field: 'event', op: 'in' as const, value: ['a', 'b'] }],
  }
  expect(metricQueryOf(metricDraftOf(saved))).toEqual(saved) // the form round-trips what it shows
})

test('a funnel from the form and back; the fields the form does not show are kept on save', () => {
  const saved = {
    steps: [{ entity: 'events', event: 'signup' }, { entity: 'events', event: 'purchase', filters: [{ field: 'properties.amount', op: 'gt' as const, value: 5 }] }],
    identity: 'users_id' as const, windowDays: 7, range: { from: '-30d' }, breakdown: 'properties.source',
  }
  expect(funnelOf(funnelDraftOf(saved))).toEqual(saved)
  const draft = funnelDraftOf({ ...saved, windowDays: undefined, breakdown: undefined })
  expect([draft.windowDays, draft.breakdown]).toEqual([14, '']) // the API's default window
  expect(funnelOf({ ...draft, breakdown: '  ' })).not.toHaveProperty('breakdown')
  expect(keepUnshown(funnelOf(draft), { ...saved, sample: 0.25 })).toMatchObject({ sample: 0.25, windowDays: 14 })
  expect(keepUnshown({ entity: 'events' } as Record<string, unknown>, { entity: 'emails', limit: 10, exact: true, bucket: 'day' })).toEqual({ entity: 'events', limit: 10, exact: true })
  expect(keepUnshown({ entity: 'events' }, undefined)).toEqual({ entity: 'events' })
})

test('one line per insight in the list', () => {
  expect(summaryOf('metric', { entity: 'events', metrics: ['count'], dimensions: ['properties.plan'], bucket: 'day', range: { from: '-7d' } }))
    .toBe('count of events by properties.plan per day')
  expect(summaryOf('funnel', { steps: [{ entity: 'events', event: 'a' }, { entity: 'events', event: 'b' }], identity: 'users_id', range: { from: '-7d' } }))
    .toBe('a → b · by users_id')
})

test('a new dashboard\'s slug from its name takes the API\'s pattern, or none', () => {
  const pattern = /^[a-z0-9][a-z0-9-]{1,63}$/
  const cases: [string, string][] = [['Made here', 'made-here'], ['  Ünïcode — Growth!! 2026 ', 'unicode-growth-2026'], ['x', ''], ['!!!', ''], ['a'.repeat(100), 'a'.repeat(64)], [`${'ab-'.repeat(21)}c`, `${'ab-'.repeat(21)}c`]]
  for (const [name, slug] of cases) {
    expect([name, slugOf(name)]).toEqual([name, slug])
    if (slug) expect(slug).toMatch(pattern)
  }
  expect(slugOf(`${'a'.repeat(63)} b`)).toBe('a'.repeat(63)) // no dash left at the end where it was cut
})
