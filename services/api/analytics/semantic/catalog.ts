// The semantic catalog: the chartable entities of a product, each declared once by the area that owns its data
// (./entities/*.ts), with the SQL behind every name. Queries are built from these fixed SQL pieces only;
// names from a request are looked up here and never reach SQL themselves.
import { eventsEntities } from './entities/tracking'
import { mailEntities } from './entities/mail'
import { realtimeEntities } from './entities/realtime'
import type { Entity } from './entity'

export const ENTITIES: readonly Entity[] = [...eventsEntities, ...mailEntities, ...realtimeEntities]
const byName = new Map(ENTITIES.map((e) => [e.entity, e]))

export const entityNamed = (name: string): Entity | undefined => byName.get(name)

/**
 * The product's usage cycle: the calendar month (UTC) that contains `now`. Every product has the same cycle today; the
 * catalog answers it so a dashboard can chart "this cycle" without knowing the rule.
 */
export function currentCycle(now = new Date()): { from: string; to: string } {
  const from = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1))
  const to = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1))
  return { from: from.toISOString(), to: to.toISOString() }
}

/** The catalog object exactly as the spec lists its fields (no SQL leaves this module). */
export function catalogOf(productId: string, now = new Date()) {
  return {
    product_id: productId,
    generated_at: now.toISOString(),
    cycle: currentCycle(now),
    entities: ENTITIES.map((e) => ({
      entity: e.entity, extensionSlug: e.extensionSlug, entityName: e.entityName, description: e.description,
      timeColumn: e.timeColumn, propertiesColumn: e.propertiesColumn,
      dimensions: e.dimensions.map(({ name, description }) => ({ name, description })),
      metrics: e.metrics.map(({ name, type, description }) => ({ name, type, description })),
      identityKinds: [...e.identityKinds],
    })),
  }
}
