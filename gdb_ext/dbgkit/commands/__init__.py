"""One module per GDB command, named after it."""
