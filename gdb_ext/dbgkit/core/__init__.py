"""GDB-free core: ELF/CFI parsing, process maps, ptrace registers and a fast stack unwinder."""
