#!/usr/bin/env bash
# @brief Run a -fsanitize=undefined program under GDB and stop where each undefined behaviour happens.
#
# Breakpoints go on the UBSan runtime's report handlers (__ubsan_handle_*: GCC's libubsan and Clang's
# static runtime use the same names, with an _abort suffix under -fno-sanitize-recover). At each stop
# the script selects the caller's frame, the program's own code, and shows its source line and the
# backtrace. In batch mode (stdin not a terminal, or --batch) it then lets the runtime print its report
# and goes on to the next one; interactively it leaves you at the GDB prompt at each stop, the
# caller's frame selected there too (each handler breakpoint's commands show it).
set -euo pipefail

usage() {
    cat <<EOF
usage: scripts/ubsan-gdb.sh [--batch] [-h|--help] [--] PROGRAM [ARGS...]

Run PROGRAM (built with -fsanitize=undefined and -g) under gdb -nx, stopping at every UBSan report.
  --batch     print every report with its source line and backtrace, then exit (the default when
              stdin is not a terminal)
  -h, --help  show this help
EOF
}

batch=0
if [[ ! -t 0 ]]; then
    batch=1
fi
while [[ $# -gt 0 ]]; do
    case "$1" in
        --batch) batch=1 ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        -*) echo "ubsan-gdb.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
        *) break ;;
    esac
    shift
done
if [[ $# -lt 1 ]]; then
    usage >&2
    exit 2
fi
if ! command -v gdb >/dev/null; then
    echo "ubsan-gdb.sh: gdb is not installed (scripts/setup.sh installs it)" >&2
    exit 2
fi

commands="$(mktemp "${TMPDIR:-/tmp}/ubsan-gdb.XXXXXX")"
trap 'rm -f "$commands"' EXIT

# libubsan is a shared library (GCC), so its handlers exist only once the program has started: stop
# at main, set the breakpoints there (rbreak's listing of every handler is kept quiet), go on.
cat >"$commands" <<'GDB'
set pagination off
set confirm off
tbreak main
run
define ubsan-show
  echo \n==== ubsan-gdb: undefined behaviour here ====\n
  frame 1
  echo ---- backtrace ----\n
  backtrace
end
python gdb.execute("rbreak ^__ubsan_handle_", to_string=True)
continue
GDB
if [[ $batch -eq 1 ]]; then
    cat >>"$commands" <<'GDB'
while $_isvoid($_exitcode) && $_isvoid($_exitsignal)
  ubsan-show
  echo ---- report ----\n
  continue
end
GDB
else
    # Every later stop comes from a `continue` typed at the prompt, which runs no script: each
    # handler breakpoint shows its stop itself, as the loop above does in batch mode.
    cat >>"$commands" <<'GDB'
python
for _bp in gdb.breakpoints():
    _bp.commands = "ubsan-show\n"
end
if $_isvoid($_exitcode) && $_isvoid($_exitsignal)
  ubsan-show
  echo \nubsan-gdb: `continue` prints the report and runs to the next one.\n
end
GDB
fi

gdb_args=(-nx -q -x "$commands")
if [[ $batch -eq 1 ]]; then
    gdb_args=(-nx -q -batch -x "$commands")
fi
exec gdb "${gdb_args[@]}" --args "$@"
