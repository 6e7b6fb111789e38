// What a channel read or publish answers when the product's namespaces do not allow it, in the platform's one error shape.
import { ApiError } from '../errors'

export const namespaceNotRegistered = (namespace: string, path: string) =>
  new ApiError('namespace_not_registered', `Namespace "${namespace}" is not registered for this product`, {
    fields: [{ path, message: `names namespace "${namespace}", which is not registered` }],
  })

export const presenceDisabled = (namespace: string) =>
  new ApiError('presence_disabled', `Presence is not enabled for namespace "${namespace}"`)

export const payloadStorageNotProvisioned = (size: number, cap: number) =>
  new ApiError('payload_storage_not_provisioned',
    `Serialized data is ${size} bytes, above the inline cap of ${cap}; provision payload storage (PUT /realtime/payload-storage) to publish it`,
    { size, inlineCap: cap })
