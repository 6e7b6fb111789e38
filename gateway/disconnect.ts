// The close codes the gateway uses are the protocol's, with the reconnect rule of each: they live in shared/ so the
// reference client reads the same table (shared/realtime/close-codes.ts).
export { DISCONNECTS, type Disconnect } from '../shared/realtime/close-codes'
