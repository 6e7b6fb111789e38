// Project-local backing-service ports used by scripts/up and scripts/test when no URL is given.
export const LOCAL_PORTS = { postgres: 55432, redis: 56379, s3: 59000, smtp: 59025 } as const
