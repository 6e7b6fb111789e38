// Byte sizes by name, so that a limit reads as what it is (`256 * KiB`), never as a number to recompute (262144).
// No imports: anything may use it, the reference client included.

/** 1 024 bytes. */
export const KiB = 1024
/** 1 048 576 bytes. */
export const MiB = 1024 * KiB
