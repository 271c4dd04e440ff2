"""memdump's recording, the GDB side: the session and its two recorders (breakpoints, the
in-process library), what a stop and an end need, the live queries, the attach window."""
