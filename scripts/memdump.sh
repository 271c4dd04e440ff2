#!/usr/bin/env bash
# @brief Run a program under GDB with memdump recording its heap, as if it ran by itself.
#
# The program's stdin, stdout and stderr are its own: GDB's messages go to a temporary log (shown on
# stderr only when recording fails), the program's output bypasses GDB through saved file descriptors,
# and the script exits with the program's status (128+N when signal N killed it, like a shell).
# Recording problems exit with 125 (like env(1) and timeout(1)), bad arguments with 2.
set -euo pipefail

root_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
me="memdump.sh"

# The environment this script was started with: the program gets exactly this one (bash has added
# SHLVL, PWD and _ to its own since, and GDB adds LINES and COLUMNS).
start_env=()
while IFS= read -r -d '' entry; do
    if [[ "$entry" == ?*=* ]]; then
        start_env+=("$entry")
    fi
done </proc/$$/environ

# The value VAR had in the start environment; fails when it was not there.
start_value() {
    local entry
    for entry in "${start_env[@]}"; do
        if [[ "$entry" == "$1="* ]]; then
            printf '%s' "${entry#*=}"
            return 0
        fi
    done
    return 1
}

usage() {
    cat <<EOF
usage: scripts/memdump.sh [-o DUMP] [--report] [--json FILE] [--depth N] [--] PROGRAM [ARGS...]

Run PROGRAM under GDB with memdump recording every heap operation into a dump, then exit with the
program's exit status (128+N when signal N killed it). The program's stdin, stdout and stderr pass
through untouched; the dump's path is printed on stderr.

  -o, --output DUMP  write the dump to DUMP (default: ./PROGRAM.PID.memdump, chosen by memdump)
  --report           print the leak report (text) on stderr when the program ends
  --json FILE        write the leak report as JSON to FILE
  --depth N          record at most N frames per call stack (memdump's default: 32)
  -h, --help         show this help

Exit status: the program's; 2 for bad arguments; 125 when recording or the report failed.
EOF
}

# One line on stderr, exit 2: for every mistake in the command line.
bad_usage() {
    echo "${me}: $*" >&2
    exit 2
}

# Quote one word for a GDB command that splits its arguments like gdb.string_to_argv (a backslash
# before every character that is not plainly safe).
argv_quote() {
    printf '%s' "$1" | sed 's/[^A-Za-z0-9_.,:=+@%/-]/\\&/g'
}

dump=""
report=0
json=""
depth=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        -o|--output)
            [[ $# -ge 2 ]] || bad_usage "$1 needs a file name (see --help)"
            dump="$2"
            shift 2
            ;;
        --output=*) dump="${1#*=}"; shift ;;
        --report) report=1; shift ;;
        --json)
            [[ $# -ge 2 ]] || bad_usage "$1 needs a file name (see --help)"
            json="$2"
            shift 2
            ;;
        --json=*) json="${1#*=}"; shift ;;
        --depth)
            [[ $# -ge 2 ]] || bad_usage "$1 needs a number (see --help)"
            depth="$2"
            shift 2
            ;;
        --depth=*) depth="${1#*=}"; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        -?*) bad_usage "unknown option '$1' (see --help)" ;;
        *) break ;;
    esac
done

[[ $# -gt 0 ]] || bad_usage "no program to run (usage: ${me} [OPTIONS] -- PROGRAM [ARGS...])"
[[ -n "$1" ]] || bad_usage "the program name is empty"
if [[ -n "$depth" && ! "$depth" =~ ^[0-9]+$ ]]; then
    bad_usage "--depth needs a non-negative number, not '${depth}'"
fi
[[ "$dump" != *$'\n'* && "$json" != *$'\n'* ]] || bad_usage "file names with a newline are not supported"

program="$1"
shift
if [[ "$program" == */* ]]; then
    [[ -e "$program" ]] || bad_usage "${program}: no such file"
else
    resolved="$(type -P -- "$program" || true)"
    [[ -n "$resolved" ]] || bad_usage "${program}: command not found"
    program="$resolved"
fi
[[ -f "$program" ]] || bad_usage "${program}: not a regular file"
[[ -x "$program" ]] || bad_usage "${program}: permission denied (not executable)"
if [[ -n "$json" && -d "$json" ]]; then
    bad_usage "--json ${json}: is a directory"
fi
gdb_path="$(type -P gdb || true)"
[[ -n "$gdb_path" ]] || { echo "${me}: gdb is not installed" >&2; exit 125; }

work="$(mktemp -d "${TMPDIR:-/tmp}/memdump-sh.XXXXXX")"
trap 'rm -rf -- "$work"' EXIT
log="${work}/gdb.log"
status_file="${work}/status"
commands="${work}/commands.gdb"

{
    echo "set pagination off"
    echo "set confirm off"
    echo "set width 0"
    echo "set print inferior-events off"
    echo "set print thread-events off"
    # Signals reach the program as without GDB; fatal ones stop first so memdump notes them.
    echo "handle all nostop noprint pass"
    echo "handle SIGINT nostop noprint pass"
    echo "handle SIGSEGV SIGBUS SIGILL SIGFPE SIGABRT stop print pass"
    # GDB runs with the start environment plus SHELL=/bin/sh (it starts the program with $SHELL)
    # and MEMDUMP_SH_STATUS, and adds LINES and COLUMNS for the program: undo all that.
    echo "unset environment MEMDUMP_SH_STATUS"
    for var in LINES COLUMNS SHELL; do
        if value="$(start_value "$var")" && [[ "$value" != *$'\n'* ]]; then
            echo "set environment ${var}=${value}"
        else
            echo "unset environment ${var}"
        fi
    done
    # The program's stdout and stderr are the script's (saved as fds 3 and 4); GDB's are the log.
    # GDB quotes the program's arguments for /bin/sh itself (gdb --args).
    # /bin/sh exports PWD: unset it again when the program was not to have it.
    unset_pwd=""
    if ! start_value PWD >/dev/null; then
        unset_pwd="unset PWD; "
    fi
    echo "set exec-wrapper /bin/sh -c '${unset_pwd}exec \"\$0\" \"\$@\" 1>&3 2>&4 3>&- 4>&-'"
    echo "source ${root_dir}/gdb_ext/memdump.py"
    if [[ -n "$depth" ]]; then
        echo "set memdump depth ${depth}"
    fi
    if [[ -n "$dump" ]]; then
        echo "memdump -o $(argv_quote "$dump")"
    else
        echo "memdump"
    fi
    echo "run"
    cat <<EOF
python
import os
import gdb
while gdb.selected_inferior().pid:
    gdb.execute("continue")
_code = gdb.convenience_variable("_exitcode")
_signal = gdb.convenience_variable("_exitsignal")
_status = 128 + int(_signal) if _signal is not None else int(_code) if _code is not None else 125
with open(os.environ["MEMDUMP_SH_STATUS"], "w") as _fh:
    _fh.write(f"{_status}\n")
end
EOF
} >"$commands"

gdb_rc=0
env -i -- "${start_env[@]}" SHELL=/bin/sh MEMDUMP_SH_STATUS="$status_file" \
    "$gdb_path" -nx -batch -x "$commands" --args "$program" "$@" 3>&1 4>&2 >"$log" 2>&1 \
    || gdb_rc=$?

used="$(sed -n 's/^memdump: recording process [0-9]* to //p' "$log" | head -n 1)"
grep -E '^memdump: .*(warning|error)' "$log" >&2 || true
if [[ ! -s "$status_file" ]]; then
    echo "${me}: recording failed (gdb exited with ${gdb_rc}); GDB said:" >&2
    sed 's/^/    /' "$log" >&2
    exit 125
fi
status="$(cat "$status_file")"
if [[ -z "$used" ]]; then
    echo "${me}: memdump wrote no dump; GDB said:" >&2
    sed 's/^/    /' "$log" >&2
    exit 125
fi
echo "${me}: dump: ${used}" >&2

analyze="${root_dir}/scripts/memdump-analyze"
if [[ "$report" -eq 1 ]]; then
    if ! "$analyze" "$used" >&2; then
        echo "${me}: the report failed" >&2
        exit 125
    fi
fi
if [[ -n "$json" ]]; then
    if ! "$analyze" --format json -o "$json" "$used"; then
        echo "${me}: the JSON report failed" >&2
        exit 125
    fi
fi
exit "$status"
