// Runs once before the test files, for every tier: nothing here may need a service (the unit tier runs with none).
// The integration tests' database is migrated by scripts/test before bun starts, and again by test/helpers.ts, so a
// plain `bun test` against running services still finds the schema current.
process.env.LOG_REQUESTS ??= '0'
