// The inspector's presence panel: the roster as realtime_presence_read answers it, then every join and leave the
// subscription hears applied to it, and a log of those joins and leaves.
import { api, describe } from '../../api'
import { h, replace } from '../../dom'
import { clockTime } from './format'

interface Member { identity: string; connections: number; info: unknown }
type Change = [kind: 'join' | 'leave', identity: string, info: unknown]

/** The newest joins and leaves the log keeps. */
export const SHOWN_EVENTS = 100

export function presencePanel(channel: string) {
  const members = new Map<string, Member>()
  const roster = h('ul', { class: 'members', 'data-testid': 'presence-members' })
  const log = h('ol', { class: 'events', 'data-testid': 'presence-events' })
  const note = h('p', { class: 'muted' })
  // Changes heard while a roster read is out: its answer may predate them, so they are applied again on top of it.
  let heardDuringRead: Change[] | undefined

  function apply([kind, identity, info]: Change): void {
    if (kind === 'join') members.set(identity, { identity, connections: members.get(identity)?.connections ?? 1, info })
    else members.delete(identity)
  }

  function draw(): void {
    replace(note, members.size ? '' : 'No one is present.')
    replace(roster, [...members.values()].sort((a, b) => a.identity.localeCompare(b.identity)).map((member) =>
      h('li', { 'data-identity': member.identity },
        h('code', {}, member.identity),
        member.connections > 1 ? h('span', { class: 'muted' }, ` ×${member.connections}`) : null,
        member.info !== null && member.info !== undefined ? h('pre', { class: 'info' }, JSON.stringify(member.info)) : null)))
  }

  return {
    element: h('div', {}, h('h2', {}, 'Present'), note, roster, h('h3', {}, 'Joins and leaves'), log),

    /** A join or leave pushed by the gateway. */
    heard(...change: Change): void {
      heardDuringRead?.push(change)
      apply(change)
      draw()
      const [kind, identity] = change
      log.prepend(h('li', { 'data-kind': kind, 'data-identity': identity },
        h('span', { class: `badge ${kind}` }, kind === 'join' ? 'joined' : 'left'), ' ', h('code', {}, identity), ' ',
        h('time', { class: 'muted' }, clockTime(new Date()))))
      while (log.children.length > SHOWN_EVENTS) log.lastElementChild!.remove()
    },

    /** Reads the roster afresh (after every subscribe: a reconnect may have missed joins and leaves). */
    async read(): Promise<void> {
      try {
        // The channel's status first: a namespace without presence has no roster to read (and a read would be a 4xx).
        const status = await api.run<{ presence: unknown }>('realtime_channel_get', { path: { channel } })
        if (status.presence === null) return replace(note, 'Presence is off for this namespace.')
        heardDuringRead = []
        const answer = await api.run<{ members: Member[] }>('realtime_presence_read', { path: { channel } })
        members.clear()
        for (const member of answer.members) members.set(member.identity, member)
        for (const change of heardDuringRead) apply(change)
        draw()
      } catch (failure) {
        replace(note, describe(failure))
      } finally {
        heardDuringRead = undefined
      }
    },
  }
}
