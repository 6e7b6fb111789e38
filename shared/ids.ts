// UUIDs, the ids of every resource: one test of the shape, case-insensitive (ids are compared lower-case). Where an id
// in a path is not a UUID it names nothing (404), never a 400: the spec's rule for Mail ids.
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export const isUuid = (value: string) => UUID.test(value)
