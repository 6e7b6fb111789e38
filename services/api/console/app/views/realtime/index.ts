import { h, replace } from '../../dom'
import type { AreaView } from '../area'

/** Realtime: not drawn yet. */
export const realtimeView: AreaView = ({ root }) => {
  replace(root, h('p', { class: 'muted' }, 'Realtime'))
}
