// An address that drops connection attempts, as a dead server's does (a host powered off, a cut network): a TCP
// listener on 127.0.0.1 that never accepts, its one-place accept queue filled, so Linux drops every later SYN and a
// client's connect neither completes nor fails. Node and Bun listeners accept by themselves, hence libc through FFI
// (Linux with glibc, as the tests run: libc.so.6, and sockaddr_in's layout there).
import { dlopen, FFIType, ptr } from 'bun:ffi'

const libc = dlopen('libc.so.6', {
  socket: { args: [FFIType.i32, FFIType.i32, FFIType.i32], returns: FFIType.i32 },
  bind: { args: [FFIType.i32, FFIType.ptr, FFIType.u32], returns: FFIType.i32 },
  listen: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 },
  getsockname: { args: [FFIType.i32, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
  close: { args: [FFIType.i32], returns: FFIType.i32 },
})

const AF_INET = 2
const SOCK_STREAM = 1
const SOCK_CLOEXEC = 0o2000000 // not inherited by the processes a test starts

export interface Blackhole {
  readonly port: number
  close(): void
}

export async function startBlackhole(): Promise<Blackhole> {
  const { socket, bind, listen, getsockname, close } = libc.symbols
  const fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)
  if (fd < 0) throw new Error('socket() failed')
  const address = new Uint8Array(16) // sockaddr_in: family (host order), port (network order), 127.0.0.1, zeros
  const view = new DataView(address.buffer)
  view.setUint16(0, AF_INET, true)
  address.set([127, 0, 0, 1], 4)
  const length = new Uint32Array([address.length])
  if (bind(fd, ptr(address), address.length) !== 0 || listen(fd, 0) !== 0 || getsockname(fd, ptr(address), ptr(length)) !== 0) {
    close(fd)
    throw new Error('bind(), listen() or getsockname() failed')
  }
  const port = view.getUint16(2, false)
  // The one connection the queue holds: it completes and waits there; the attempts after it get no answer at all.
  const filler = await Bun.connect({ hostname: '127.0.0.1', port, socket: { data() {} } })
  return {
    port,
    close() {
      filler.end()
      close(fd)
    },
  }
}
