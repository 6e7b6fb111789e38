// The inspector's live feed: publications as they arrive, newest first, each with its offset, arrival time and data.
import type { Publication } from '../../../../../../shared/realtime-client/client'
import { h } from '../../dom'
import { clockTime, payloadBlock } from './format'

/** The newest publications a busy channel keeps on the page; older ones are dropped from it. */
export const SHOWN_PUBLICATIONS = 200

export function publicationFeed() {
  const list = h('ol', { class: 'feed', 'data-testid': 'publications' })
  const empty = h('p', { class: 'muted' }, 'Nothing published since you started watching.')
  return {
    element: h('div', {}, empty, list),
    /** A live publication carries no timestamp on the wire: the time shown is when the page received it. */
    add(publication: Publication): void {
      empty.remove()
      list.prepend(h('li', { 'data-testid': 'publication', 'data-offset': publication.offset ?? '' },
        h('div', { class: 'meta' },
          h('span', { class: 'offset' }, publication.offset !== undefined ? `#${publication.offset}` : 'no history'),
          h('time', {}, clockTime(new Date()))),
        payloadBlock(publication)))
      while (list.children.length > SHOWN_PUBLICATIONS) list.lastElementChild!.remove()
    },
  }
}
