import { h, replace } from '../../dom'
import type { AreaView } from '../area'

/** Mail: not drawn yet. */
export const mailView: AreaView = ({ root }) => {
  replace(root, h('p', { class: 'muted' }, 'Mail'))
}
