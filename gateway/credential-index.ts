// Which live connections hold a token of which credential (`akid`), so an invalidation naming a credential finds its
// connections without walking every connection, and one naming a credential no connection here holds costs nothing.
export class CredentialIndex<C> {
  private readonly byAkid = new Map<string, Set<C>>()
  private readonly held = new Map<C, string>()

  /** `connection` now holds a token of `akid` (a connect, or an `auth` with a token of another credential). */
  hold(connection: C, akid: string): void {
    if (this.held.get(connection) === akid) return
    this.release(connection)
    this.held.set(connection, akid)
    let holders = this.byAkid.get(akid)
    if (!holders) this.byAkid.set(akid, (holders = new Set()))
    holders.add(connection)
  }

  /** The connection is gone. */
  release(connection: C): void {
    const akid = this.held.get(connection)
    if (akid === undefined) return
    this.held.delete(connection)
    const holders = this.byAkid.get(akid)
    holders?.delete(connection)
    if (holders?.size === 0) this.byAkid.delete(akid)
  }

  /** The connections holding a token of `akid` now (a copy: closing them changes the index). */
  holders(akid: string): C[] {
    return [...(this.byAkid.get(akid) ?? [])]
  }
}
