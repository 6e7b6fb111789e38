// What an area of the console (Analytics, Realtime, Mail) gives the shell: a view drawn into `root` for the rest of the
// route, and optionally a way to stop what it started (a live subscription, timers) when the reader moves away.
export interface AreaContext {
  root: HTMLElement
  productId: string
  /** The route after #/p/{productId}/{area}/. */
  rest: string[]
}

export type Cleanup = () => void
export type AreaView = (context: AreaContext) => Promise<Cleanup | void> | Cleanup | void
