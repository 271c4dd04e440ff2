"""The lock commands' GDB layer: what `deadlocks` reads from GDB, a lock's variable name, and
`contention --sample`'s sampler. Their decisions are made in the GDB-free dbgkit.core.locks."""
