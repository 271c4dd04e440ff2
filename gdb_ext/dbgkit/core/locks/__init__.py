"""The GDB-free core of the lock commands (`deadlocks`, `contention`, `ctxswitches`): glibc's lock
layouts, the call scan, the wait-for graph, contention and context switches, thread progress."""
