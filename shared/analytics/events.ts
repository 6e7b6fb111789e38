// What the readers of tracked events agree on: where events are read from, whose identity an event counts for, and
// the HyperLogLog sketch its distinct identities are kept in. The catalog's `events` entity, the rollups and the
// planner's rollup path all take these from here, so the raw and the rolled-up answers count the same thing.

/** Every event: the partitions, and during an upgrade the legacy rows not moved yet (migration 0015). */
export const EVENTS_SOURCE = 'tracked_events_all'

/** The identity an event counts for in `identities`: users_id, else anonymous_id, email or phone. */
export const eventIdentity = (alias: string) => `coalesce(${alias}.users_id, ${alias}.anonymous_id, ${alias}.email, ${alias}.phone)`

/**
 * HyperLogLog parameters of every sketch: 2^14 registers of 5 bits. The relative standard error is 1.04 / sqrt(2^14),
 * about 0.81 % (so about 95 % of answers fall within 1.6 % and 99.7 % within 2.4 %). Below about 1 280 distinct
 * identities a sketch keeps the identities' hashes themselves and counts them exactly. Sketches of other parameters
 * cannot be merged: never change these without rebuilding the rollups.
 */
export const HLL_LOG2M = 14
export const HLL_REGWIDTH = 5

/** The sketch of a set of rows' distinct identities (an aggregate). */
export const identitySketch = (alias: string) => `hll_add_agg(hll_hash_text(${eventIdentity(alias)}), ${HLL_LOG2M}, ${HLL_REGWIDTH})`

/** The base set of the rollups: per product, hour and event, with no property values. */
export const BASE_SET = 0

/** A property set has at most this many keys (v1..v3 of analytics_event_rollups). */
export const MAX_SET_KEYS = 3

/**
 * The rollups' finer rows (analytics_event_slots, migration 0020) are per this many minutes, from the hour: a range's
 * ends outside its whole hours are read from them. It divides an hour, and the offsets of today's zones.
 */
export const SLOT_MINUTES = 5

/**
 * And per this many hours of the UTC day (analytics_event_day_parts, migration 0021): a query reads a part's row
 * instead of its hours' wherever no bucket boundary cuts it.
 */
export const DAY_PART_HOURS = 6

/**
 * SQL for the start of the bin of `interval` ('5 minutes', '6 hours') holding `instant`, bins counted from a UTC
 * midnight: the one definition of a slot and a part, shared by the rollups that write them and the queries that read.
 */
export const binSql = (interval: string, instant: string) =>
  `date_bin(interval '${interval}', ${instant}, timestamptz '2000-01-01 00:00:00+00')`
