// Ids in paths: anything that is not a UUID names nothing (404), never a 400: the spec's rule for Mail ids.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export const isUuid = (value: string) => UUID.test(value)
