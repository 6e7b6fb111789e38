// A dashboard's version history under its grid (analytics_dashboard_versions_list, newest first, 20 at a time), with
// Restore on older versions: confirmed in the page, warned about unsaved edits, one at a time.
import { api, describe } from '../../api'
import { h, replace, when } from '../../dom'
import { authorOf, memberEmails } from './authors'

export interface Version {
  version: number
  reason: string
  created_by: string | null
  created_at: string
  definition: { tiles: unknown[] }
}

export interface HistoryHost {
  /** Whether the grid has layout edits not saved (a restore would drop them). */
  unsavedEdits(): boolean
  /** Restores `version` and redraws the page; rejects with the API's refusal. */
  restore(version: number): Promise<void>
  /** Whether the page is saving or restoring: no restore starts meanwhile. */
  busy(): boolean
}

const PAGE = 20

export class History {
  private authors: Promise<Map<string, string>> | undefined
  /** The latest request started: an answer to an older one is dropped (two draws at once never interleave). */
  private request = 0
  private stopped = false

  constructor(
    readonly section: HTMLElement,
    private readonly productId: string,
    private readonly dashboardPath: { id: string; idOrSlug: string },
    private readonly host: HistoryHost,
  ) {}

  stop(): void {
    this.stopped = true
  }

  /** Disables every Restore while the page saves or restores. */
  setDisabled(disabled: boolean): void {
    for (const button of this.section.querySelectorAll<HTMLButtonElement>('button[data-action]')) button.disabled = disabled
  }

  /** Draws the newest page of versions, or appends the page after version `after` (Older versions). */
  async draw(after?: number): Promise<void> {
    const request = ++this.request
    if (after === undefined) replace(this.section, h('h2', {}, 'Version history'), h('p', { class: 'muted' }, 'Loading versions…'))
    let page: { versions: Version[]; has_more: boolean }
    let emails: Map<string, string>
    try {
      this.authors ??= memberEmails(this.productId)
      page = await api.run('analytics_dashboard_versions_list', { path: this.dashboardPath, query: { limit: PAGE, after } })
      emails = await this.authors
    } catch (error) {
      if (request !== this.request || this.stopped) return
      replace(this.section, h('h2', {}, 'Version history'), h('p', { class: 'error', role: 'alert' }, describe(error)))
      return
    }
    if (request !== this.request || this.stopped) return
    const rows = page.versions.map((version) => this.row(version, emails, after === undefined && version === page.versions[0]))
    const more = page.has_more
      ? h('button', { type: 'button', class: 'link', 'data-testid': 'older-versions', onclick: (event: Event) => { (event.target as HTMLElement).remove(); void this.draw(page.versions.at(-1)!.version) } }, 'Older versions')
      : null
    if (after === undefined) {
      replace(this.section,
        h('h2', {}, 'Version history'),
        h('p', { class: 'muted' }, 'Every save and restore is a version; restoring one writes it again as the newest.'),
        // Scrolls inside its card on a narrow screen, rather than widening the page.
        h('div', { class: 'table-scroll' }, h('table', { class: 'versions' },
          h('thead', {}, h('tr', {}, ['Version', 'Why', 'When', 'By', 'Tiles', ''].map((title) => h('th', {}, title)))),
          h('tbody', {}, rows))),
        more)
    } else {
      this.section.querySelector('tbody')?.append(...rows)
      if (more) this.section.append(more)
    }
    this.setDisabled(this.host.busy())
  }

  private row(version: Version, emails: Map<string, string>, current: boolean): HTMLElement {
    const action = h('td', { class: 'version-action' })
    const offer = () => replace(action, current
      ? h('span', { class: 'muted' }, 'current')
      : h('button', { type: 'button', class: 'secondary small', 'data-action': 'restore', onclick: () => confirm() }, 'Restore'))
    // Asked in the page (no window.confirm): what it does, and what it drops.
    const confirm = () => replace(action, h('span', { class: 'confirm', 'data-testid': 'confirm-restore' },
      h('span', {}, `Restore v${version.version}?`),
      this.host.unsavedEdits() ? h('span', { class: 'error', 'data-testid': 'unsaved-warning' }, ' Your unsaved layout edits will be lost.') : null, ' ',
      h('button', { type: 'button', class: 'small', 'data-action': 'confirm-restore', onclick: (event: Event) => void restore(event.target as HTMLButtonElement) }, 'Restore'), ' ',
      h('button', { type: 'button', class: 'secondary small', 'data-action': 'keep', onclick: offer }, 'Keep')))
    const restore = async (button: HTMLButtonElement) => {
      if (this.host.busy()) return
      button.disabled = true
      await this.host.restore(version.version).catch(() => offer()) // the page shows the refusal
    }
    offer()
    return h('tr', { 'data-version': version.version },
      h('td', {}, h('strong', {}, `v${version.version}`)),
      h('td', {}, version.reason),
      h('td', {}, when(version.created_at)),
      h('td', { class: 'muted', title: version.created_by ?? '' }, authorOf(emails, version.created_by)),
      h('td', {}, `${version.definition.tiles.length} tile${version.definition.tiles.length === 1 ? '' : 's'}`),
      action)
  }
}
