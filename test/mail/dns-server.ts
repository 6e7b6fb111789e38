// A tiny authoritative DNS server over UDP for the domain-check tests: answers TXT queries from a map (split into
// 255-byte strings, as real servers split long records), NXDOMAIN for names it does not know. Real packets, real resolver.
import { createSocket } from 'node:dgram'

export interface DnsServer {
  port: number
  records: Map<string, string[]>
  close(): void
}

function readName(packet: Buffer, offset: number): { name: string; end: number } {
  const labels: string[] = []
  while (packet[offset]! !== 0) {
    const length = packet[offset]!
    labels.push(packet.subarray(offset + 1, offset + 1 + length).toString('ascii'))
    offset += length + 1
  }
  return { name: labels.join('.').toLowerCase(), end: offset + 1 }
}

function txtData(value: string): Buffer {
  const chunks: Buffer[] = []
  const bytes = Buffer.from(value)
  for (let i = 0; i < bytes.length; i += 255) {
    const part = bytes.subarray(i, i + 255)
    chunks.push(Buffer.from([part.length]), part)
  }
  return Buffer.concat(chunks)
}

export async function startDnsServer(): Promise<DnsServer> {
  const records = new Map<string, string[]>()
  const socket = createSocket('udp4')
  socket.on('message', (query, from) => {
    const { name, end } = readName(query, 12)
    const type = query.readUInt16BE(end)
    const values = records.get(name)
    const answers = type === 16 && values ? values : []
    const header = Buffer.alloc(12)
    query.copy(header, 0, 0, 2) // id
    header.writeUInt16BE(0x8400 | (query.readUInt16BE(2) & 0x0100) | (values ? 0 : 3), 2) // response, authoritative, RD copied, NXDOMAIN if unknown
    header.writeUInt16BE(1, 4)
    header.writeUInt16BE(answers.length, 6)
    const question = query.subarray(12, end + 4)
    const rrs = answers.map((value) => {
      const data = txtData(value)
      const rr = Buffer.alloc(12)
      rr.writeUInt16BE(0xc00c, 0) // pointer to the question's name
      rr.writeUInt16BE(16, 2)
      rr.writeUInt16BE(1, 4)
      rr.writeUInt32BE(60, 6)
      rr.writeUInt16BE(data.length, 10)
      return Buffer.concat([rr, data])
    })
    socket.send(Buffer.concat([header, question, ...rrs]), from.port, from.address)
  })
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve))
  return { port: socket.address().port, records, close: () => socket.close() }
}
