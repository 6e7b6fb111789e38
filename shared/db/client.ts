// The process's one PostgreSQL pool. Values always go through tagged templates (postgres.js).
import postgres from 'postgres'
import { config } from '../config'

export type Sql = postgres.Sql

/** The shared pool, created on first use so that modules can import it without connecting. */
export const sql: Sql = postgres(config.databaseUrl, {
  max: 10,
  idle_timeout: 30,
  connect_timeout: 10,
  onnotice: () => {},
  // uuid columns come back as strings; timestamps as Date, serialized to ISO-8601 by JSON.
})
