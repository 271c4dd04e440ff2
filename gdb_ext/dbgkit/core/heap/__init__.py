"""glibc's heap as the allocator sees it, in a stopped live process or a core file, without GDB:
the chunks in use (walk), the process's memory and threads (source), glibc's layouts and symbols
(layout, libc), and valgrind's leak kinds for all of it (kinds)."""
