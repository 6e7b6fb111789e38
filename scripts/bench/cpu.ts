// CPU time meters for the benchmarks: a Redis server's (INFO cpu, summed over a cluster's masters) and a local
// process's (/proc/<pid>/stat), read before and after a measured run, so a figure is CPU per operation, not wall time.
import type { Cluster, Redis } from 'ioredis'

/** Seconds of CPU (user + system) the Redis server has used since it started; on a cluster, every master's summed. */
export async function redisCpuSeconds(client: Redis | Cluster): Promise<number> {
  const nodes = 'nodes' in client && typeof client.nodes === 'function' ? (client as Cluster).nodes('master') : [client as Redis]
  let total = 0
  for (const node of nodes) {
    const info = (await node.info('cpu')) as string
    const field = (name: string) => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? NaN)
    total += field('used_cpu_user') + field('used_cpu_sys')
  }
  return total
}

/**
 * Reads the Redis server has made from its clients' sockets since it started (INFO stats `total_reads_processed`); on
 * a cluster, every master's summed. Commands per read say how well a client's writes are coalesced: each read costs the
 * server a system call and an event-loop turn.
 */
export async function redisReads(client: Redis | Cluster): Promise<number> {
  const nodes = 'nodes' in client && typeof client.nodes === 'function' ? (client as Cluster).nodes('master') : [client as Redis]
  let total = 0
  for (const node of nodes) total += Number(/^total_reads_processed:(\d+)/m.exec((await node.info('stats')) as string)?.[1] ?? NaN)
  return total
}

/** Clock ticks per second of /proc's utime and stime (USER_HZ: 100 on Linux whatever the kernel's HZ). */
const USER_HZ = 100

/** Seconds of CPU (user + system) a local process has used, or NaN when it is gone or /proc is not there. */
export async function processCpuSeconds(pid: number): Promise<number> {
  try {
    const stat = await Bun.file(`/proc/${pid}/stat`).text()
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) / USER_HZ
  } catch {
    return NaN
  }
}

/** A meter: CPU seconds so far of whatever it watches. */
export type CpuMeter = () => Promise<number>
