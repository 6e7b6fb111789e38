import { h, replace } from '../../dom'
import type { AreaView } from '../area'

/** Analytics: not drawn yet. */
export const analyticsView: AreaView = ({ root }) => {
  replace(root, h('p', { class: 'muted' }, 'Analytics'))
}
