// The live channel inspector (#/p/{productId}/realtime/inspector/{channel}): the console gets a short-lived token for
// its own user (realtime_tokens_issue), watches the channel through the real gateway with the reference client, and
// shows publications and presence joins and leaves as they arrive; history, the roster and a test publish go through
// the platform's REST operations. Leaving the view disconnects the client.
import { RealtimeClient, type Publication } from '../../../../../../shared/realtime-client/client'
import { api, describe } from '../../api'
import { h, replace, when } from '../../dom'
import { areaHref, go } from '../../router'
import type { AreaView, Cleanup } from '../area'

interface IssuedToken {
  token: string
  gatewayUrl: string
  expiresAt: string
  subject: string
  channels: { name: string; ops: string[] }[]
  dropped: { name: string; ops: string[]; reason: string }[]
}
interface Member { identity: string; connections: number; info: unknown }
interface HistoryEntry { id: string; offset: number; epoch: string; publishedAt: string; data?: unknown; ref?: unknown }

/** What the page keeps of a busy channel: the newest publications and presence events, the rest dropped. */
const SHOWN_PUBLICATIONS = 200
const SHOWN_EVENTS = 100
const HISTORY_DEFAULT = 20

/** A payload as readable text: JSON pretty-printed, or the stored object an over-cap publish was delivered as. */
const payloadText = (entry: { data?: unknown; ref?: unknown }) =>
  entry.ref !== undefined ? `stored payload ${JSON.stringify(entry.ref, null, 2)}` : JSON.stringify(entry.data, null, 2) ?? 'null'

const time = (date: Date) => date.toLocaleTimeString(undefined, { hour12: false }) + `.${String(date.getMilliseconds()).padStart(3, '0')}`

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

  // ---- publications, newest first
  const publications = h('ol', { class: 'feed', 'data-testid': 'publications' })
  const noPublications = h('p', { class: 'muted' }, 'Nothing published since you started watching.')
  function showPublication(publication: Publication): void {
    noPublications.remove()
    publications.prepend(h('li', { 'data-testid': 'publication', 'data-offset': publication.offset ?? '' },
      h('div', { class: 'meta' },
        h('span', { class: 'offset' }, publication.offset !== undefined ? `#${publication.offset}` : 'no history'),
        h('time', {}, time(new Date()))),
      h('pre', { class: 'data' }, payloadText(publication))))
    while (publications.children.length > SHOWN_PUBLICATIONS) publications.lastElementChild!.remove()
  }

  // ---- presence: the roster as read, then every join and leave applied to it
  const members = new Map<string, Member>()
  const roster = h('ul', { class: 'members', 'data-testid': 'presence-members' })
  const events = h('ol', { class: 'events', 'data-testid': 'presence-events' })
  const presenceNote = h('p', { class: 'muted' })
  function drawRoster(): void {
    replace(presenceNote, members.size ? '' : 'No one is present.')
    replace(roster, [...members.values()].sort((a, b) => a.identity.localeCompare(b.identity)).map((member) =>
      h('li', { 'data-identity': member.identity },
        h('code', {}, member.identity),
        member.connections > 1 ? h('span', { class: 'muted' }, ` ×${member.connections}`) : null,
        member.info !== null && member.info !== undefined ? h('pre', { class: 'info' }, JSON.stringify(member.info)) : null)))
  }
  // Joins and leaves heard while a roster read is out: its answer may predate them, so they are applied again after it.
  let heardDuringRead: [kind: 'join' | 'leave', identity: string, info: unknown][] | undefined
  function applyPresence(kind: 'join' | 'leave', identity: string, info: unknown): void {
    if (kind === 'join') members.set(identity, { identity, connections: members.get(identity)?.connections ?? 1, info })
    else members.delete(identity)
  }
  function presenceEvent(kind: 'join' | 'leave', identity: string, info: unknown): void {
    heardDuringRead?.push([kind, identity, info])
    applyPresence(kind, identity, info)
    drawRoster()
    events.prepend(h('li', { 'data-kind': kind, 'data-identity': identity },
      h('span', { class: `badge ${kind}` }, kind === 'join' ? 'joined' : 'left'), ' ', h('code', {}, identity), ' ',
      h('time', { class: 'muted' }, time(new Date()))))
    while (events.children.length > SHOWN_EVENTS) events.lastElementChild!.remove()
  }
  async function readRoster(): Promise<void> {
    try {
      // The channel's status first: a namespace without presence has no roster to read (and a read would be a 4xx).
      const status = await api.run<{ presence: unknown }>('realtime_channel_get', { path: { channel } })
      if (status.presence === null) return replace(presenceNote, 'Presence is off for this namespace.')
      heardDuringRead = []
      const answer = await api.run<{ members: Member[] }>('realtime_presence_read', { path: { channel } })
      members.clear()
      for (const member of answer.members) members.set(member.identity, member)
      for (const [kind, identity, info] of heardDuringRead) applyPresence(kind, identity, info)
      drawRoster()
    } catch (failure) {
      replace(presenceNote, describe(failure))
    } finally {
      heardDuringRead = undefined
    }
  }

  // ---- history
  const lastN = h('input', { name: 'last_n', type: 'number', min: 1, max: 1000, value: HISTORY_DEFAULT })
  const historyOut = h('div', { 'data-testid': 'history' })
  const historyForm = h('form', { class: 'inline-form' },
    h('label', {}, 'Last', lastN), h('button', { type: 'submit', class: 'secondary', 'data-testid': 'history-read' }, 'Read history'))
  historyForm.addEventListener('submit', async (event) => {
    event.preventDefault()
    replace(historyOut, h('p', { class: 'muted' }, 'Reading…'))
    try {
      const answer = await api.run<{ entries: HistoryEntry[]; offset: number; epoch: string }>('realtime_history_read',
        { path: { channel }, query: { last_n: lastN.valueAsNumber || HISTORY_DEFAULT } })
      replace(historyOut, answer.entries.length
        ? h('ol', { class: 'feed' }, [...answer.entries].reverse().map((entry) =>
          h('li', { 'data-testid': 'history-entry', 'data-offset': entry.offset },
            h('div', { class: 'meta' }, h('span', { class: 'offset' }, `#${entry.offset}`), h('time', {}, when(entry.publishedAt))),
            h('pre', { class: 'data' }, payloadText(entry)))))
        : h('p', { class: 'muted', 'data-testid': 'history-empty' },
          answer.epoch ? 'No entries in that window.' : 'No history: the namespace keeps none, or nothing was published.'))
    } catch (failure) {
      replace(historyOut, h('p', { class: 'error', role: 'alert' }, describe(failure)))
    }
  })

  // ---- a test publish
  const message = h('textarea', { name: 'data', rows: 4, spellcheck: 'false' }, '{\n  "hello": "from the console"\n}')
  const published = h('p', { class: 'muted', role: 'status', 'data-testid': 'publish-result' })
  const publishButton = h('button', { type: 'submit' }, 'Publish')
  const publishForm = h('form', { class: 'publish-form', 'data-testid': 'publish-form' },
    h('label', {}, 'JSON data', message), h('div', { class: 'actions' }, publishButton, published))
  publishForm.addEventListener('submit', async (event) => {
    event.preventDefault()
    let data: unknown
    try {
      data = JSON.parse(message.value)
    } catch (failure) {
      published.className = 'error'
      return replace(published, `Not JSON: ${(failure as Error).message}`)
    }
    publishButton.disabled = true
    try {
      const answer = await api.run<{ id: string; offset?: number }>('realtime_messages_publish', { body: { channel, data } })
      published.className = 'ok'
      replace(published, answer.offset !== undefined ? `Published at offset ${answer.offset}.` : `Published (${answer.id}).`)
    } catch (failure) {
      published.className = 'error'
      replace(published, describe(failure))
    } finally {
      publishButton.disabled = false
    }
  })

  replace(root, head,
    h('div', { class: 'inspector-grid', 'data-channel': channel },
      h('section', { class: 'card inspector' },
        h('h2', {}, 'Publications on ', h('code', {}, channel)), state,
        noPublications, publications),
      h('div', { class: 'side' },
        h('section', { class: 'card' },
          h('h2', {}, 'Present'), presenceNote, roster,
          h('h3', {}, 'Joins and leaves'), events),
        h('section', { class: 'card' }, h('h2', {}, 'Publish a test message'), publishForm))),
    h('section', { class: 'card' }, h('div', { class: 'card-head' }, h('h2', {}, 'History'), historyForm), historyOut))

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
      publication: showPublication,
      join: (event) => presenceEvent('join', event.identity, event.info),
      leave: (event) => presenceEvent('leave', event.identity, event.info),
      subscribed: () => {
        setState('subscribed', 'Watching as ', h('code', {}, first.subject))
        void readRoster()
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
