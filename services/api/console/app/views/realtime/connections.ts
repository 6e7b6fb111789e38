// The Live channels tab's connections panel: the product's connections on one gateway at a time, from
// realtime_connections_list (asking is what makes the gateways report them), read again with each refresh of the tab.
import { api, describe } from '../../api'
import { count, h, replace, when } from '../../dom'
import { areaHref } from '../../router'
import { fluidTable } from './fluid-table'

/** Connections per page. */
export const CONNECTIONS_PAGE = 50

interface Connection { id: string; subject: string; connectedAt: string; subscriptions: number; channels: string[] }
interface ConnectionsPage {
  gateways: { gateway: string; connections: number; reportedAt: string }[]
  gateway: string | null
  connections: Connection[]
  has_more: boolean
}

/** A gateway as a reader tells them apart: the start of its id. */
const short = (id: string) => id.slice(0, 8)

export function connectionsPanel(productId: string) {
  const select = h('select', { name: 'gateway', 'data-testid': 'gateway-select' })
  const status = h('p', { class: 'muted', 'data-testid': 'connections-state' })
  const list = h('div', { 'data-testid': 'connections-list' }, h('p', { class: 'muted' }, 'Asking the gateways…'))
  const previous = h('button', { type: 'button', class: 'secondary', 'data-testid': 'connections-previous', disabled: true }, 'Previous')
  const next = h('button', { type: 'button', class: 'secondary', 'data-testid': 'connections-next', disabled: true }, 'Next')
  let gateway: string | undefined
  const cursors: (string | undefined)[] = [undefined]
  let last: Connection | undefined
  let onChange: () => void = () => undefined
  /** Answers read so far: the first ask is what starts the gateways' reports, so its empty answer proves nothing yet. */
  let answers = 0

  select.addEventListener('change', () => {
    gateway = select.value
    cursors.splice(0, cursors.length, undefined)
    onChange()
  })
  previous.addEventListener('click', () => {
    if (cursors.length > 1) cursors.pop()
    onChange()
  })
  next.addEventListener('click', () => {
    if (!last) return
    cursors.push(last.id)
    onChange()
  })

  async function read(): Promise<void> {
    try {
      const page = await api.run<ConnectionsPage>('realtime_connections_list',
        { query: { limit: CONNECTIONS_PAGE, gateway, after: cursors.at(-1) } })
      answers++
      // The gateway shown went away: back to the first page of the first one reporting.
      if (gateway !== undefined && !page.gateways.some((g) => g.gateway === gateway)) {
        gateway = undefined
        cursors.splice(0, cursors.length, undefined)
      }
      gateway ??= page.gateway ?? undefined
      replace(select, page.gateways.map((g) =>
        h('option', { value: g.gateway, selected: g.gateway === page.gateway }, `Gateway ${short(g.gateway)}… (${count(g.connections)} ${g.connections === 1 ? 'connection' : 'connections'})`)))
      select.hidden = page.gateways.length === 0
      last = page.connections.at(-1)
      previous.disabled = cursors.length === 1
      next.disabled = !page.has_more
      replace(status, page.gateways.length
        ? `${count(page.gateways.reduce((sum, g) => sum + g.connections, 0))} connections on ${count(page.gateways.length)} ${page.gateways.length === 1 ? 'gateway' : 'gateways'}`
        : '')
      replace(list, page.connections.length
        ? fluidTable(page.connections, [
          ['Connection', (c) => h('code', { title: c.id }, `${short(c.id)}…`)],
          ['Subject', (c) => h('code', { class: 'subject' }, c.subject)],
          ['Connected', (c) => when(c.connectedAt)],
          ['Subscriptions', (c) => h('span', { class: 'subscriptions' }, count(c.subscriptions)), 'number'],
          ['Channels', (c) => h('span', { class: 'channel-list' }, c.channels.map((channel) =>
            h('a', { class: 'channel-name', href: areaHref(productId, 'realtime', 'inspector', channel) }, channel))), 'wide'],
        ], { 'data-testid': 'connections' }, (c) => ({ 'data-connection': c.id, 'data-subject': c.subject }))
        : answers === 1 && !page.gateways.length
          ? h('p', { class: 'muted', 'data-testid': 'connections-waiting' }, 'Asking the gateways: they report within about a second.')
          : h('p', { class: 'muted', 'data-testid': 'connections-empty' }, 'No connection of this product on any gateway right now.'))
    } catch (failure) {
      replace(status, h('span', { class: 'error' }, `Not refreshed: ${describe(failure)}`))
    }
  }

  return {
    element: h('section', { class: 'card' },
      h('div', { class: 'card-head' }, h('h2', {}, 'Connections'), select), status, list, h('div', { class: 'pager' }, previous, next)),
    read,
    /** What to do when the reader picks another gateway or page (the tab reads again). */
    onChange(handler: () => void): void {
      onChange = handler
    },
  }
}
