// The semantic catalog (analytics_catalog_get): every entity the product can chart, with its dimensions, metrics
// and identity kinds, as the API answers it.
import { api } from '../../api'
import { h, replace, table, when } from '../../dom'

interface Named { name: string; description: string }
export interface Entity {
  entity: string
  extensionSlug: string
  entityName: string
  description: string
  timeColumn: string | null
  propertiesColumn: string | null
  dimensions: Named[]
  metrics: (Named & { type: string })[]
  identityKinds: string[]
}
export interface Catalog { product_id: string; generated_at: string; cycle: { from: string; to: string } | null; entities: Entity[] }

/** The catalog as the API answers it (one read per view that needs it). */
export const readCatalog = () => api.run<Catalog>('analytics_catalog_get')

/** Metric types by entity and name, for how a chart shows totals (charts.ts MetricTypes). */
export const metricTypesOf = (catalog: Catalog) =>
  new Map(catalog.entities.map((entity) => [entity.entity, new Map(entity.metrics.map((metric) => [metric.name, metric.type]))]))

/** Every field a query may name on `entity`: its dimensions, and `properties.` when it has a properties column. */
export const fieldsOf = (entity: Entity) => [...entity.dimensions.map((dimension) => dimension.name), ...(entity.propertiesColumn ? ['properties.'] : [])]

export async function catalogView(root: HTMLElement): Promise<void> {
  replace(root, h('p', { class: 'muted' }, 'Loading the catalog…'))
  const catalog = await readCatalog()
  replace(root,
    h('p', { class: 'muted catalog-meta' },
      `${catalog.entities.length} entities`,
      catalog.cycle ? ` · usage cycle ${when(catalog.cycle.from)} to ${when(catalog.cycle.to)}` : '',
      ` · generated ${when(catalog.generated_at)}`),
    // Buttons, not `#entity-…` links: the hash is the console's route, and such a link (opened in a new tab, say) is no route.
    h('nav', { class: 'catalog-index' }, catalog.entities.map((entity) => h('button', {
      type: 'button', 'data-entity-link': entity.entity,
      onclick: () => root.querySelector(`[data-entity="${CSS.escape(entity.entity)}"]`)?.scrollIntoView({ behavior: 'smooth' }),
    }, entity.entityName))),
    h('div', { class: 'catalog', 'data-testid': 'catalog' }, catalog.entities.map(entityCard)),
  )
}

function entityCard(entity: Entity): HTMLElement {
  return h('section', { class: 'card entity', 'data-entity': entity.entity },
    h('div', { class: 'entity-head' },
      h('h2', {}, entity.entityName, ' ', h('code', { class: 'entity-name' }, entity.entity)),
      h('span', { class: 'tag' }, entity.extensionSlug)),
    h('p', {}, entity.description),
    h('p', { class: 'muted' },
      'time ', h('code', {}, entity.timeColumn ?? '—'),
      entity.propertiesColumn ? [' · properties ', h('code', {}, `properties.<key>`)] : null,
      ' · identity kinds ',
      entity.identityKinds.length
        ? entity.identityKinds.map((kind) => h('span', { class: 'tag identity', 'data-identity': kind }, kind))
        : h('span', {}, 'none')),
    h('div', { class: 'entity-columns' },
      h('div', {},
        h('h3', {}, `Metrics (${entity.metrics.length})`),
        table(entity.metrics, [
          ['name', (metric) => h('code', {}, metric.name)],
          ['type', (metric) => metric.type],
          ['description', (metric) => metric.description],
        ], { class: 'metrics' })),
      h('div', {},
        h('h3', {}, `Dimensions (${entity.dimensions.length})`),
        table(entity.dimensions, [
          ['name', (dimension) => h('code', {}, dimension.name)],
          ['description', (dimension) => dimension.description],
        ], { class: 'dimensions' }))),
  )
}
