// A tiny authoritative DNS server over UDP answering A queries from a map (name -> IPv4 addresses) that a test may
// change between lookups (DNS rebinding); AAAA and other types get an empty answer, unknown names NXDOMAIN. TTL 0.
import { createSocket } from 'node:dgram'

export interface ADnsServer {
  port: number
  records: Map<string, string[]>
  close(): void
}

export async function startADnsServer(): Promise<ADnsServer> {
  const records = new Map<string, string[]>()
  const socket = createSocket('udp4')
  socket.on('message', (query, from) => {
    const labels: string[] = []
    let offset = 12
    while (query[offset]! !== 0) {
      labels.push(query.subarray(offset + 1, offset + 1 + query[offset]!).toString('ascii'))
      offset += query[offset]! + 1
    }
    const end = offset + 1
    const name = labels.join('.').toLowerCase()
    const type = query.readUInt16BE(end)
    const addresses = records.get(name)
    const answers = type === 1 && addresses ? addresses : []
    const header = Buffer.alloc(12)
    query.copy(header, 0, 0, 2)
    header.writeUInt16BE(0x8400 | (query.readUInt16BE(2) & 0x0100) | (addresses ? 0 : 3), 2)
    header.writeUInt16BE(1, 4)
    header.writeUInt16BE(answers.length, 6)
    const rrs = answers.map((address) => {
      const rr = Buffer.alloc(16)
      rr.writeUInt16BE(0xc00c, 0)
      rr.writeUInt16BE(1, 2)
      rr.writeUInt16BE(1, 4)
      rr.writeUInt32BE(0, 6)
      rr.writeUInt16BE(4, 10)
      address.split('.').forEach((part, i) => rr.writeUInt8(Number(part), 12 + i))
      return rr
    })
    socket.send(Buffer.concat([header, query.subarray(12, end + 4), ...rrs]), from.port, from.address)
  })
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve))
  return { port: socket.address().port, records, close: () => socket.close() }
}
