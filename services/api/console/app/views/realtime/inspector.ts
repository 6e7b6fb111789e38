// The live channel inspector (#/p/{productId}/realtime/inspector/{channel}): the console gets a short-lived token for
// its own user (realtime_tokens_issue), watches the channel through the real gateway with the reference client, and
// shows publications and presence joins and leaves as they arrive; history, the roster and a test publish go through
// the platform's REST operations. Leaving the view disconnects the client.
import { RealtimeClient } from '../../../../../../shared/realtime-client/client'
import { api, describe } from '../../api'
import { h, replace } from '../../dom'
import { areaHref, go } from '../../router'
import type { AreaView, Cleanup } from '../area'
import { publicationFeed } from './feed'
import { historyPanel } from './history'
import { presencePanel } from './presence'
import { publishForm } from './publish'

interface IssuedToken {
  token: string
  gatewayUrl: string
  expiresAt: string
  subject: string
  channels: { name: string; ops: string[] }[]
  dropped: { name: string; ops: string[]; reason: string }[]
}

export const inspectorView: AreaView = ({ root, productId, rest }) => {
  const channel = rest[0] ?? ''
  const input = h('input', { name: 'channel', required: true, value: channel, placeholder: 'chat:lobby', autocomplete: 'off', spellcheck: 'false' })
  const form = h('form', { class: 'channel-form', 'data-testid': 'inspector-form' },
    h('label', {}, 'Channel', input),
    h('button', { type: 'submit' }, channel ? 'Watch another' : 'Watch'))
  form.addEventListener('submit', (event) => {
    event.preventDefault()
    const wanted = input.value.trim()
    if (wanted) go(areaHref(productId, 'realtime', 'inspector', wanted))
  })
  const head = h('section', { class: 'card inspector-head' },
    h('div', {},
      h('h1', {}, 'Channel inspector'),
      h('p', { class: 'muted' }, 'Watch a channel live through the gateway, as a client would: publications and presence as they happen.')),
    form)
  if (!channel) {
    replace(root, head)
    return
  }
  return watch(root, head, channel)
}

/** Draws the inspector for `channel` and connects; the cleanup disconnects, also while the connect is under way. */
function watch(root: HTMLElement, head: HTMLElement, channel: string): Cleanup {
  let stopped = false
  let client: RealtimeClient | undefined
  const state = h('p', { class: 'state', 'data-testid': 'inspector-state', 'data-state': 'connecting' }, 'Getting a token…')
  const setState = (name: string, ...text: (string | Node)[]) => {
    state.setAttribute('data-state', name)
    replace(state, h('span', { class: `dot ${name}` }), ...text)
  }

  const feed = publicationFeed()
  const presence = presencePanel(channel)
  const history = historyPanel(channel)

  replace(root, head,
    h('div', { class: 'inspector-grid', 'data-channel': channel },
      h('section', { class: 'card inspector' },
        h('h2', {}, 'Publications on ', h('code', {}, channel)), state,
        feed.element),
      h('div', { class: 'side' },
        h('section', { class: 'card' }, presence.element),
        h('section', { class: 'card' }, h('h2', {}, 'Publish a test message'), publishForm(channel)))),
    h('section', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', {}, 'History'), history.form), history.output))

  const issue = () => api.run<IssuedToken>('realtime_tokens_issue', { body: { channels: [{ name: channel, ops: ['subscribe'] }] } })
  void (async () => {
    let first: IssuedToken
    try {
      first = await issue()
    } catch (failure) {
      return setState('failed', describe(failure))
    }
    if (stopped) return
    let unused: IssuedToken | undefined = first
    client = new RealtimeClient({
      url: first.gatewayUrl,
      // The first connect uses the token that named the gateway; every reconnect and refresh asks for a fresh one.
      getToken: async () => {
        const token = unused ?? await issue()
        unused = undefined
        return token.token
      },
      onState: (next, detail) => {
        if (next === 'connected') setState('connected', 'Connected as ', h('code', {}, first.subject))
        else if (next === 'connecting') setState('connecting', 'Connecting…')
        else setState('disconnected', `Disconnected${detail?.code ? ` (${detail.code}${detail.reason ? `: ${detail.reason}` : ''})` : ''}; retrying…`)
      },
    })
    client.subscribe(channel, {
      publication: (publication) => feed.add(publication),
      join: (event) => presence.heard('join', event.identity, event.info),
      leave: (event) => presence.heard('leave', event.identity, event.info),
      subscribed: () => {
        setState('subscribed', 'Watching as ', h('code', {}, first.subject))
        void presence.read()
      },
      unsubscribed: (reason) => setState('failed', `Not watching: ${reason}`),
    })
    client.connect()
  })()

  return () => {
    stopped = true
    client?.disconnect()
  }
}
