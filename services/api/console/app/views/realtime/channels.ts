// Live channels (#/p/{productId}/realtime/channels): the product's channels with a subscriber on some gateway now,
// each with its subscribers and presence counts, from realtime_channels_list, and its connections per gateway
// (./connections.ts); refreshed by polling every REFRESH_MS while the tab is visible (docs/console.md says why
// polling). A row opens the inspector or the archive on its channel.
import { api, describe } from '../../api'
import { count, h, replace } from '../../dom'
import { areaHref } from '../../router'
import type { AreaView, Cleanup } from '../area'
import { connectionsPanel } from './connections'
import { clockTime } from './format'
import { fluidTable } from './fluid-table'

/** How often the page asks again: one request at a time, the next one REFRESH_MS after the last answer. */
export const REFRESH_MS = 2000
/** Channels per page. */
export const CHANNELS_PAGE = 50

export interface ActiveChannel {
  channel: string
  namespace: string
  subscribers: number
  presence: { members: number; connections: number } | null
}

const presenceText = (presence: ActiveChannel['presence']) =>
  presence ? `${count(presence.members)} ${presence.members === 1 ? 'member' : 'members'} · ${count(presence.connections)} ${presence.connections === 1 ? 'connection' : 'connections'}` : 'off'

export const channelsView: AreaView = ({ root, productId }): Cleanup => {
  let stopped = false
  let timer: ReturnType<typeof setTimeout> | undefined
  let prefix = ''
  /** The `after` of each page walked to, so "Previous" goes back; the current page is the last. */
  const cursors: (string | undefined)[] = [undefined]

  const input = h('input', { name: 'prefix', placeholder: 'chat: or chat:room-', autocomplete: 'off', spellcheck: 'false', maxlength: 128 })
  const filter = h('form', { class: 'channel-form', 'data-testid': 'channels-filter' },
    h('label', {}, 'Name starts with', input), h('button', { type: 'submit', class: 'secondary' }, 'Filter'))
  const state = h('p', { class: 'state', 'data-testid': 'channels-state' }, 'Loading…')
  const list = h('div', { 'data-testid': 'channels-list' })
  const previous = h('button', { type: 'button', class: 'secondary', 'data-testid': 'channels-previous', disabled: true }, 'Previous')
  const next = h('button', { type: 'button', class: 'secondary', 'data-testid': 'channels-next', disabled: true }, 'Next')
  let lastPage: ActiveChannel[] = []
  const connections = connectionsPanel(productId)
  connections.onChange(() => void refresh())

  filter.addEventListener('submit', (event) => {
    event.preventDefault()
    prefix = input.value.trim()
    cursors.splice(0, cursors.length, undefined)
    void refresh()
  })
  previous.addEventListener('click', () => {
    if (cursors.length > 1) cursors.pop()
    void refresh()
  })
  next.addEventListener('click', () => {
    const last = lastPage.at(-1)
    if (!last) return
    cursors.push(last.channel)
    void refresh()
  })

  replace(root,
    h('section', { class: 'card inspector-head' },
      h('div', {},
        h('h1', {}, 'Live channels'),
        h('p', { class: 'muted' }, `Channels with a subscriber on some gateway now, refreshed every ${REFRESH_MS / 1000} s.`)),
      filter),
    h('section', { class: 'card' }, state, list, h('div', { class: 'pager' }, previous, next)),
    connections.element)

  let inFlight: Promise<void> | undefined
  /** Reads the current page now (one read at a time) and schedules the next one. */
  function refresh(): Promise<void> {
    clearTimeout(timer)
    inFlight ??= Promise.all([read(), connections.read()]).then(() => undefined).finally(() => {
      inFlight = undefined
      schedule()
    })
    return inFlight
  }

  function schedule(): void {
    clearTimeout(timer)
    // A hidden tab asks nothing; it asks again once visible (onVisible).
    if (!stopped && !document.hidden) timer = setTimeout(() => void refresh(), REFRESH_MS)
  }

  async function read(): Promise<void> {
    const after = cursors.at(-1)
    try {
      const page = await api.run<{ channels: ActiveChannel[]; has_more: boolean }>('realtime_channels_list',
        { query: { limit: CHANNELS_PAGE, after, ...(prefix ? { prefix } : {}) } })
      if (stopped) return
      lastPage = page.channels
      previous.disabled = cursors.length === 1
      next.disabled = !page.has_more
      state.className = 'state'
      replace(state, h('span', { class: 'dot subscribed' }), `Updated ${clockTime(new Date())}`)
      replace(list, page.channels.length
        ? fluidTable(page.channels, [
          ['Channel', (c) => h('a', { class: 'channel-name', href: areaHref(productId, 'realtime', 'inspector', c.channel), title: 'Open in the inspector' }, c.channel), 'wide'],
          ['Namespace', (c) => h('code', {}, c.namespace)],
          ['Subscribers', (c) => h('span', { class: 'subscribers' }, count(c.subscribers)), 'number'],
          ['Presence', (c) => h('span', { class: 'presence' }, presenceText(c.presence))],
          ['', (c) => h('span', { class: 'actions' },
            h('a', { class: 'button secondary', href: areaHref(productId, 'realtime', 'inspector', c.channel) }, 'Inspect'),
            h('a', { class: 'button secondary', href: areaHref(productId, 'realtime', 'archive', c.channel) }, 'Archive'))],
        ], { 'data-testid': 'channels' }, (c) => ({ 'data-channel': c.channel }))
        : h('p', { class: 'muted', 'data-testid': 'channels-empty' },
          prefix ? `No channel starting with "${prefix}" has a subscriber right now.` : 'No channel has a subscriber right now.'))
    } catch (failure) {
      if (stopped) return
      // Kept on screen: the last page stays, the next refresh tries again.
      state.className = 'state error'
      replace(state, h('span', { class: 'dot failed' }), `Not refreshed: ${describe(failure)}`)
    }
  }

  const onVisible = () => {
    if (!document.hidden) void refresh()
  }
  document.addEventListener('visibilitychange', onVisible)
  void refresh()
  return () => {
    stopped = true
    clearTimeout(timer)
    document.removeEventListener('visibilitychange', onVisible)
  }
}
