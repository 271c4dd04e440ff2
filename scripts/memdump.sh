#!/usr/bin/env bash
# @brief Run a program under GDB with memdump recording its heap, as if it ran by itself; or record
# a running process for a while (-p PID) and detach.
#
# The program's stdin, stdout and stderr are its own: GDB's messages go to a temporary log (shown on
# stderr only when recording fails), the program's output bypasses GDB through saved file descriptors,
# and the script exits with the program's status (128+N when signal N killed it, like a shell).
# Recording problems exit with 125 (like env(1) and timeout(1)), bad arguments with 2.
set -euo pipefail

script="$(readlink -f -- "${BASH_SOURCE[0]}")"
root_dir="${script%/*/*}"
# The toolkit's parts. Installed (`cmake --install`, the Debian package: docs/install.md), this
# script is P/bin/memdump and they are in P/share/dbgkit and P/lib/dbgkit; in a checkout it is
# scripts/memdump.sh and they are beside it, the built ones in build/ (or $MEMDUMP_BUILD_DIR).
if [[ -d "${root_dir}/share/dbgkit/gdb" ]]; then
    me="memdump"
    usage_name="memdump"
    gdb_dir="${root_dir}/share/dbgkit/gdb"
    analyzer_dir="${root_dir}/share/dbgkit/analyzer"
    symbolizer="${root_dir}/lib/dbgkit/memdump-symbolize"
else
    me="memdump.sh"
    usage_name="scripts/memdump.sh"
    gdb_dir="${root_dir}/gdb_ext"
    analyzer_dir="${root_dir}/analyzer"
    symbolizer="${MEMDUMP_BUILD_DIR:-${root_dir}/build}/gdb_ext/symbolize/memdump-symbolize"
fi

# The environment this script was started with, in its order: the program gets exactly this one
# (bash has added SHLVL, PWD and _ to its own since, and GDB adds LINES and COLUMNS).
start_env=()
while IFS= read -r -d '' entry; do
    if [[ "$entry" == ?*=* ]]; then
        start_env+=("$entry")
    fi
done </proc/$$/environ

usage() {
    cat <<EOF
usage: ${usage_name} [-o DUMP] [--report] [--json FILE] [--depth N] [--breakpoints]
       ${usage_name//?/ } [--no-compact] [--children] [--guard SPEC] [--redzones[=N]]
       ${usage_name//?/ } [--] PROGRAM [ARGS...]
       ${usage_name} [-o DUMP] [--report] [--json FILE] [--depth N] [--breakpoints]
       ${usage_name//?/ } [--no-compact] -p PID [--for SECONDS]
       ${usage_name} -p PID --heap [--report] [--json FILE]

Run PROGRAM under GDB with memdump recording every heap operation into a dump, then exit with the
program's exit status (128+N when signal N killed it). The program's stdin, stdout and stderr pass
through untouched, and it gets its arguments, argv[0] and environment exactly as typed; a #! script
is run by its interpreter as the kernel would, an executable text file without #! by /bin/sh as a
shell would. The dump's path is printed on stderr (with --children, every dump's).

With -p, attach to the running process PID instead and record it until SECONDS have passed, or until
this script gets SIGINT (Ctrl-C) or SIGTERM, then detach: the process goes on by itself.

  -o, --output DUMP  write the dump to DUMP (default: ./PROGRAM.PID.memdump, chosen by memdump)
  --report           print the leak report (text) on stderr when the recording ends
  --json FILE        write the leak report as JSON to FILE
  --depth N          record at most N frames per call stack (memdump's default: 32)
  --breakpoints      stop the program at every allocator call instead of loading memdump's
                     in-process recorder into it (slow; for programs nothing may be loaded into)
  --no-compact       keep the dump as text (default: compacted when the recording ends, after
                     the reports, docs/dump-format.md; MEMDUMP_COMPACT=0 does the same)
  --children         also record the processes the program forks and the programs they execute,
                     each into DUMP-STEM.PID.memdump (in-process recorder; not with -p)
  --guard SPEC       place chosen blocks against an inaccessible page and keep freed ones
                     inaccessible for a while: the first overflow, underflow or use after free
                     of one is reported (an ae record) and kills the program with SIGSEGV
                     (docs/heap-errors.md). SPEC, comma-separated: all (every block while the
                     pool of 4096 slots lasts) or N% (a sampled share of the blocks, 0.0001% to
                     100% with at most 4 decimals: 5%, 0.02%), MIN-MAX (sizes in bytes), over
                     (the guard page after the block: default) or under (before),
                     align16 (blocks 16-aligned as malloc's: overflows into the slack missed),
                     tag:NAME (blocks allocated under memdump_api.h's innermost tag NAME),
                     fn:NAME (blocks allocated while the function NAME is on the stack);
                     each faulting access is reported and let through once;
                     in-process recorder, not with -p
  --redzones[=N]     give every block N bytes of red zone after it (default 16, up to 4096; its
                     malloc rounding slack too) and 8 before, and keep freed blocks in a 256 KiB
                     quarantine, all filled with a pattern: a zone or a freed block found
                     changed, at its free or realloc, as it leaves the quarantine or at exit, is
                     an hc record ("heap block overrun", "write after free") and makes the exit
                     status 99, or --error-exitcode's N (docs/heap-errors.md, "Red zones";
                     MEMDUMP_REDZONE=N[,BYTES] the same); in-process recorder, not with -p
  -p, --pid PID      record the running process PID (the blocks allocated before: walked at
                     the end, their kinds and types listed after the report)
  --for SECONDS      with -p: stop recording after SECONDS (default: at SIGINT or SIGTERM)
  --heap             with -p: record nothing; walk the process's glibc heap now (memdump heap:
                     blocks by type and size class, each arena's free bytes and fragmentation) on
                     stdout, with --report its leaks by type on stderr, with --json FILE as JSON
                     (memdump leaks --json) into FILE; the process runs on as it was
  -h, --help         show this help

valgrind memcheck's options, for the tools that run valgrind (ctest -T memcheck, CI):
any of them makes the leak report valgrind's text output, or its XML (docs/valgrind-compat.md)
  --tool=memcheck    the only tool there is
  --leak-check=no|summary|yes|full       the loss records listed with yes or full (summary)
  --show-leak-kinds=LIST, --show-reachable=yes|no   the kinds listed (definite,possible)
  --errors-for-leak-kinds=LIST           the kinds counted as errors (definite,possible)
  --error-exitcode=N exit with N when the ERROR SUMMARY counts errors
  --log-file=FILE    valgrind's output into FILE (%p the program's PID, %q{VAR}), not stderr
  --xml=yes --xml-file=FILE              valgrind's XML (protocol 4) into FILE instead
  --num-callers=N    at most N frames a stack (as --depth N); --suppressions=FILE (repeatable);
  --gen-suppressions=no|yes|all; --trace-children=yes|no (as --children); -q, --quiet (the
                     errors only, no dump path); -v, --verbose (accepted, nothing more said)

Exit status: the program's (with -p: 0, or the program's when it ended while recorded); 2 for bad
arguments (or a PID that is no running process); 125 when recording or the report failed.
EOF
}

# One line on stderr, exit 2: for every mistake in the command line.
bad_usage() {
    echo "${me}: $*" >&2
    exit 2
}

# --guard's SPEC checked as the recorder parses it (gdb_ext/recorder/guard.c), term by term.
guard_spec() {
    local term shares=0 sizes=0 sides=0 tags=0 fns=0 terms ppm
    [[ -n "$1" ]] || bad_usage "--guard needs a SPEC, not an empty one (see --help)"
    IFS=, read -r -a terms <<<"$1,"
    [[ "$1" != *, && "$1" != *,,* && "$1" != ,* ]] || bad_usage "--guard ${1}: an empty term"
    for term in "${terms[@]}"; do
        if [[ "$term" == all || "$term" == *% ]]; then
            # N%: N with at most 4 decimals, 0.0001 to 100 (parts per million: 1 to 1,000,000)
            if [[ "$term" != all ]] && ! { [[ "$term" =~ ^([0-9]{1,18})(\.([0-9]{1,4}))?%$ ]] &&
                    (( 10#${BASH_REMATCH[1]} <= 100 )) && ppm=$(( 10#${BASH_REMATCH[1]} * 10000
                    + 10#$(printf '%-4s' "${BASH_REMATCH[3]}" | tr ' ' 0) )) &&
                    (( ppm >= 1 && ppm <= 1000000 )); }; then
                bad_usage "--guard ${1}: '${term}': a share is 0.0001% to 100%, at most 4 decimals"
            fi
            (( ++shares == 1 )) || bad_usage "--guard ${1}: '${term}': a second share (all or N%)"
        elif [[ "$term" =~ ^([0-9]{1,18})-([0-9]{1,18})$ ]]; then
            (( ++sizes == 1 )) || bad_usage "--guard ${1}: '${term}': a second size range"
            (( 10#${BASH_REMATCH[1]} <= 10#${BASH_REMATCH[2]} )) \
                || bad_usage "--guard ${1}: '${term}': MIN is larger than MAX"
        elif [[ "$term" == under || "$term" == over ]]; then
            (( ++sides == 1 )) || bad_usage "--guard ${1}: '${term}': a second side (under or over)"
        elif [[ "$term" == tag:?* ]]; then
            (( ++tags == 1 )) || bad_usage "--guard ${1}: '${term}': a second tag"
        elif [[ "$term" == fn:* ]]; then
            [[ "$term" == fn:?* && "$term" != *@* ]] \
                || bad_usage "--guard ${1}: '${term}': fn:NAME needs a function's name"
            (( ++fns == 1 )) || bad_usage "--guard ${1}: '${term}': a second function"
        elif [[ "$term" != align16 ]]; then
            bad_usage "--guard ${1}: '${term}' is not all, N%, MIN-MAX, under, over, align16, tag:NAME or fn:NAME"
        fi
    done
}

# One line on stderr, exit 125: recording is not possible.
cannot() {
    echo "${me}: $*" >&2
    exit 125
}

# Print the here-document on stdin as it is, with builtins only (no `cat` process: this script
# starts before the user's program, at every run).
emit() {
    local text=""
    IFS= read -r -d '' text || true
    printf '%s' "$text"
}

# Quote one word for a GDB command that splits its arguments like gdb.string_to_argv (a backslash
# before every character that is not plainly safe).
argv_quote() {
    local word="$1" quoted="" c i
    for ((i = 0; i < ${#word}; i++)); do
        c="${word:i:1}"
        [[ "$c" == [A-Za-z0-9_.,:=+@%/-] ]] || quoted+="\\"
        quoted+="$c"
    done
    printf '%s' "$quoted"
}

# Quote one word for /bin/sh.
sh_quote() {
    printf "'%s'" "${1//\'/\'\\\'\'}"
}

# valgrind memcheck's options (docs/valgrind-compat.md): memdump as a drop-in where tools run
# valgrind (`ctest -T memcheck`, valgrind-ci). Any of them makes the report valgrind's output.
valgrind=0
vg_leak_check="summary"
vg_show=""
vg_errors=""
vg_exitcode=""
vg_log=""
vg_xml="no"
vg_xml_file=""
vg_quiet=0
vg_gen=0
vg_args=()
vg_supps=()
valgrind_option() {
    local value="${1#*=}"
    valgrind=1
    vg_args+=("$1")
    case "$1" in
        --tool=*)
            [[ "$value" == memcheck ]] \
                || bad_usage "--tool=${value}: only memcheck's leak checking is supported" ;;
        --leak-check=*)
            [[ "$value" =~ ^(no|summary|yes|full)$ ]] \
                || bad_usage "--leak-check needs no, summary, yes or full, not '${value}'"
            vg_leak_check="$value" ;;
        --show-leak-kinds=*) vg_show="$value" ;;
        --show-reachable=yes) vg_show="all" ;;
        --show-reachable=no) vg_show="definite,possible" ;;
        --errors-for-leak-kinds=*) vg_errors="$value" ;;
        --error-exitcode=*)
            [[ "$value" =~ ^(0|[1-9][0-9]{0,2})$ && "$value" -le 255 ]] \
                || bad_usage "--error-exitcode needs a number from 0 to 255, not '${value}'"
            vg_exitcode="$value" ;;
        --log-file=*) vg_log="$value" ;;
        --xml=yes|--xml=no) vg_xml="$value" ;;
        --xml-file=*) vg_xml_file="$value" ;;
        --num-callers=*)
            [[ "$value" =~ ^[1-9][0-9]{0,2}$ && "$value" -le 500 ]] \
                || bad_usage "--num-callers needs a number from 1 to 500, not '${value}'"
            depth="$value" ;;
        --suppressions=*)
            [[ -f "$value" && -r "$value" ]] || bad_usage "--suppressions=${value}: no readable file"
            vg_supps+=(--suppressions "$value") ;;
        --gen-suppressions=no) vg_gen=0 ;;
        --gen-suppressions=yes|--gen-suppressions=all) vg_gen=1 ;;
        --trace-children=yes) children=1 ;;
        --trace-children=no) children=0 ;;
        -q|--quiet) vg_quiet=1 ;;
        -v|--verbose) ;;
        *) bad_usage "unsupported value in '$1' (see docs/valgrind-compat.md)" ;;
    esac
}

dump=""
breakpoints=0
children=0
compact=1
guard=""
guard_set=0
redzones=""
redzones_set=0
[[ "${MEMDUMP_COMPACT:-1}" != 0 ]] || compact=0
report=0
heap=0
json=""
depth=""
pid=""
window=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        -o|--output)
            [[ $# -ge 2 ]] || bad_usage "$1 needs a file name (see --help)"
            dump="$2"
            shift 2
            ;;
        --output=*) dump="${1#*=}"; shift ;;
        --report) report=1; shift ;;
        --heap) heap=1; shift ;;
        --breakpoints) breakpoints=1; shift ;;
        --children) children=1; shift ;;
        --no-compact) compact=0; shift ;;
        --guard)
            [[ $# -ge 2 ]] || bad_usage "$1 needs a SPEC (see --help)"
            guard="$2"
            guard_set=1
            shift 2
            ;;
        --guard=*) guard="${1#*=}"; guard_set=1; shift ;;
        --redzones) redzones=16; redzones_set=1; shift ;;
        --redzones=*) redzones="${1#*=}"; redzones_set=1; shift ;;
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
        -p|--pid)
            [[ $# -ge 2 ]] || bad_usage "$1 needs a process id (see --help)"
            pid="$2"
            shift 2
            ;;
        --pid=*) pid="${1#*=}"; shift ;;
        --for)
            [[ $# -ge 2 ]] || bad_usage "$1 needs a number of seconds (see --help)"
            window="$2"
            shift 2
            ;;
        --for=*) window="${1#*=}"; shift ;;
        --tool=*|--leak-check=*|--show-leak-kinds=*|--show-reachable=*|--errors-for-leak-kinds=*\
        |--error-exitcode=*|--log-file=*|--xml=*|--xml-file=*|--num-callers=*|--suppressions=*\
        |--gen-suppressions=*|--trace-children=*|-q|--quiet|-v|--verbose)
            valgrind_option "$1"; shift ;;
        -h|--help) usage; exit 0 ;;
        --) shift; break ;;
        -?*) bad_usage "unknown option '$1' (see --help)" ;;
        *) break ;;
    esac
done

if [[ "$guard_set" -eq 1 ]]; then
    guard_spec "$guard"
    [[ -z "$pid" ]] || bad_usage "--guard needs a program to run (a running process's blocks are placed already)"
    [[ "$breakpoints" -eq 0 ]] || bad_usage "--guard needs the in-process recorder (not --breakpoints)"
    start_env+=("MEMDUMP_GUARD=${guard}")
fi
if [[ "$redzones_set" -eq 1 ]]; then
    if [[ ! "$redzones" =~ ^[1-9][0-9]{0,3}$ ]] || (( redzones > 4096 )); then
        bad_usage "--redzones=${redzones}: N is a number of bytes, 1 to 4096"
    fi
    [[ -z "$pid" ]] || bad_usage "--redzones needs a program to run (a running process's blocks are placed already)"
    [[ "$breakpoints" -eq 0 ]] || bad_usage "--redzones needs the in-process recorder (not --breakpoints)"
    start_env+=("MEMDUMP_REDZONE=${redzones}")
fi
if [[ -n "$depth" && ! "$depth" =~ ^[0-9]+$ ]]; then
    bad_usage "--depth needs a non-negative number, not '${depth}'"
fi
[[ "$dump" != *$'\n'* && "$json" != *$'\n'* ]] || bad_usage "file names with a newline are not supported"
if [[ -n "$json" && -d "$json" ]]; then
    bad_usage "--json ${json}: is a directory"
fi
if [[ "$heap" -eq 1 ]]; then
    [[ -n "$pid" ]] || bad_usage "--heap needs -p PID (the heap of a running process)"
    [[ -z "$window" && -z "$dump" && -z "$depth" && "$breakpoints" -eq 0 ]] \
        || bad_usage "--heap records nothing: -o, --for, --depth and --breakpoints do not apply"
fi
if [[ -n "$pid" ]]; then
    [[ "$children" -eq 0 ]] || bad_usage "--children needs a program to run (a running process's children are its own)"
    [[ $# -eq 0 ]] || bad_usage "-p records a running process: no program to run as well ('$1')"
    [[ "$pid" =~ ^[1-9][0-9]{0,9}$ ]] || bad_usage "-p needs a process id, not '${pid}'"
    if [[ -n "$window" && ! "$window" =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
        bad_usage "--for needs a number of seconds, not '${window}'"
    fi
    [[ "$pid" != "$$" ]] || bad_usage "process ${pid} is ${me} itself"
    stat_line=""
    { IFS= read -r stat_line <"/proc/${pid}/stat"; } 2>/dev/null || true
    [[ -n "$stat_line" ]] || bad_usage "no process ${pid}"
    state="${stat_line##*) }"
    case "${state%% *}" in
        Z|X) bad_usage "process ${pid} has exited (it is a zombie until its parent waits for it)" ;;
    esac
    tracer="$(sed -n 's/^TracerPid:[[:space:]]*//p' "/proc/${pid}/status" 2>/dev/null || true)"
    if [[ -n "$tracer" && "$tracer" != 0 ]]; then
        tracer_name="$(cat "/proc/${tracer}/comm" 2>/dev/null || echo '?')"
        cannot "cannot attach to process ${pid}: it is already traced by process ${tracer}" \
            "(${tracer_name}); only one debugger at a time"
    fi
else
    [[ -z "$window" ]] || bad_usage "--for needs -p PID (a program run by ${me} is recorded to its end)"
    [[ $# -gt 0 ]] || bad_usage "no program to run (usage: ${me} [OPTIONS] -- PROGRAM [ARGS...])"
    [[ -n "$1" ]] || bad_usage "the program name is empty"
fi
if [[ "$valgrind" -eq 1 ]]; then
    [[ -z "$pid" ]] || bad_usage "valgrind's options need a program to run (not -p)"
    [[ "$vg_xml" == no || -n "$vg_xml_file" ]] || bad_usage "--xml=yes needs --xml-file=FILE"
    kinds='(definite|indirect|possible|reachable)'
    for list in "$vg_show" "$vg_errors"; do
        [[ -z "$list" || "$list" =~ ^(all|none|${kinds}(,${kinds})*)$ ]] \
            || bad_usage "'${list}' is not a list of leak kinds (definite,indirect,possible,reachable; all; none)"
    done
fi
gdb_path="$(type -P gdb || true)"
[[ -n "$gdb_path" ]] || cannot "gdb is not installed"

work="$(mktemp -d "${TMPDIR:-/tmp}/memdump-sh.XXXXXX")"
trap 'rm -rf -- "$work"' EXIT
[[ "$work" != *$'\n'* ]] || cannot "the temporary directory ${work} has a newline in its name"
log="${work}/gdb.log"
status_file="${work}/status"
dump_file="${work}/dump"
report_out="${work}/report"
report_status="${work}/report.status"
commands="${work}/commands.gdb"

# --heap: the walk of glibc's heap in GDB attached for the moment it takes (memdump heap, memdump
# leaks with nothing recorded: docs/heapwalk.md); GDB detaches at its end and the process runs on.
if [[ "$heap" -eq 1 ]]; then
    {
        echo "set pagination off"
        echo "set confirm off"
        echo "set width 0"
        echo "source ${gdb_dir}/memdump.py"
        echo "memdump heap -o $(argv_quote "${work}/heap")"
        [[ "$report" -eq 0 ]] || echo "memdump leaks -o $(argv_quote "${work}/leaks")"
        [[ -z "$json" ]] || echo "memdump leaks --json -o $(argv_quote "$json")"
        echo "python import os; open(os.environ['MEMDUMP_SH_STATUS'], 'w').write('0')"
    } >"$commands"
    MEMDUMP_SH_STATUS="$status_file" "$gdb_path" -nx -batch -x "$commands" -p "$pid" </dev/null \
        >"$log" 2>&1 || gdb_rc=$?
    if [[ ! -s "$status_file" ]]; then
        why="$(sed -n 's/^ptrace: \(.*\)\.$/\1/p' "$log" | head -n 1)"
        [[ -z "$why" ]] || cannot "cannot attach to process ${pid}: ${why}"
        why="$(grep -E '^memdump: ' "$log" | tail -n 1 || true)"
        [[ -z "$why" ]] || cannot "process ${pid}: ${why}"
        echo "${me}: the heap walk failed (gdb exited with ${gdb_rc:-0}); GDB said:" >&2
        sed 's/^/    /' "$log" >&2
        exit 125
    fi
    cat -- "${work}/heap"
    [[ "$report" -eq 0 ]] || cat -- "${work}/leaks" >&2
    exit 0
fi
# valgrind's options as the analyser's (shreport.py reads them from this file, NUL-ended)
vg_file=""
if [[ "$valgrind" -eq 1 ]]; then
    vg_file="${work}/valgrind.args"
    vg_report=(--format valgrind --leak-check "$vg_leak_check")
    if [[ "$vg_xml" == yes ]]; then
        vg_report=(--format valgrind-xml --leak-check "$vg_leak_check" -o "$vg_xml_file")
    elif [[ -n "$vg_log" ]]; then
        vg_report+=(-o "$vg_log")
    fi
    [[ -z "$vg_show" ]] || vg_report+=(--show-leak-kinds "$vg_show")
    [[ -z "$vg_errors" ]] || vg_report+=(--errors-for-leak-kinds "$vg_errors")
    [[ -z "$depth" ]] || vg_report+=(--max-frames "$depth")
    [[ "$vg_quiet" -eq 0 ]] || vg_report+=(--quiet)
    [[ "$vg_gen" -eq 0 ]] || vg_report+=(--gen-suppressions)
    [[ "${vg_exitcode:-0}" -eq 0 ]] || vg_report+=(--fail-on-leak)
    vg_report+=("${vg_supps[@]}")
    for word in "${vg_args[@]}"; do
        vg_report+=("--tool-arg=${word}")
    done
    for word in "$@"; do
        vg_report+=("--command=${word}")
    done
    printf '%s\0' "${vg_report[@]}" >"$vg_file"
fi

# The settings both ways of recording share.
common_settings() {
    echo "set pagination off"
    echo "set confirm off"
    echo "set width 0"
    echo "set print inferior-events off"
    echo "set print thread-events off"
    # Signals reach the program as without GDB; fatal ones stop first so memdump notes them, and
    # so do those whose default action ends the program, which memdump scans for leaks when the
    # program does not catch them (not the timers' SIGALRM, SIGVTALRM, SIGPROF: too frequent).
    echo "handle all nostop noprint pass"
    echo "handle SIGINT nostop noprint pass"
    echo "handle SIGSEGV SIGBUS SIGILL SIGFPE SIGABRT stop print pass"
    echo "handle SIGTERM SIGHUP SIGQUIT SIGUSR1 SIGUSR2 SIGPIPE SIGXCPU SIGXFSZ stop print pass"
}

memdump_start() {
    echo "source ${gdb_dir}/memdump.py"
    # this script compacts the dumps itself, after the reports (read faster from the text)
    echo "set memdump compact off"
    if [[ -n "$depth" ]]; then
        echo "set memdump depth ${depth}"
    fi
    local mode=""
    [[ "$breakpoints" -eq 0 ]] || mode=" --breakpoints"
    [[ "$children" -eq 0 ]] || mode="${mode} --children"
    # GDB writes the SPEC into the recorder (a fn:NAME's code found by GDB); the environment's
    # is the children's
    [[ "$guard_set" -eq 0 ]] || mode="${mode} --guard $(argv_quote "$guard")"
    if [[ -n "$dump" ]]; then
        echo "memdump${mode} -o $(argv_quote "$dump")"
    else
        echo "memdump${mode}"
    fi
}

# The dump memdump wrote, into MEMDUMP_SH_DUMP, read from the versioned `memdump status --json`
# (its "path", null when no recording started); never an error, which would end GDB's -batch script.
write_dump_path() {
    emit <<'EOF'
python
import json
import os
import gdb
try:
    _path = json.loads(gdb.execute("memdump status --json", to_string=True))["path"] or ""
except (gdb.error, ValueError, KeyError):
    _path = ""
with open(os.environ["MEMDUMP_SH_DUMP"], "w") as _fh:
    _fh.write(_path)
end
EOF
}

# The reports and the compaction (below) in GDB's own Python, when the dump is small
# (memdump_analyzer/shreport.py): their output into MEMDUMP_SH_REPORT, their status into
# MEMDUMP_SH_REPORT_STATUS, which this script shows once GDB has exited; a larger dump, or none
# (nothing written), is left to the analyser this script starts after GDB.
report_in_gdb() {
    [[ "$report" -eq 1 || -n "$json" || "$compact" -eq 1 || "$valgrind" -eq 1 ]] || return 0
    emit <<'EOF'
python
import os
try:
    with open(os.environ["MEMDUMP_SH_DUMP"]) as _fh:
        _dump = _fh.read()
    _dump = _dump and (os.environ["MEMDUMP_SH_OUTPUT"] or _dump)
except OSError:
    _dump = ""
if _dump:
    from memdump_analyzer.shreport import in_gdb
    in_gdb(os.environ["MEMDUMP_SH_NAME"], _dump, os.environ["MEMDUMP_SH_REPORT_TEXT"] == "1",
           os.environ["MEMDUMP_SH_JSON"],
           [_dump] if os.environ["MEMDUMP_SH_COMPACT"] == "1" else [],
           os.environ["MEMDUMP_SH_REPORT"], os.environ["MEMDUMP_SH_REPORT_STATUS"],
           os.environ["MEMDUMP_SH_TERMINAL"] == "1")
end
EOF
}

# The exit status for this script, into MEMDUMP_SH_STATUS: the program's when it ended, else $1.
write_status() {
    emit <<EOF
python
import os
import gdb
_code = gdb.convenience_variable("_exitcode")
_signal = gdb.convenience_variable("_exitsignal")
_status = 128 + int(_signal) if _signal is not None else int(_code) if _code is not None else $1
with open(os.environ["MEMDUMP_SH_STATUS"], "w") as _fh:
    _fh.write(f"{_status}\n")
end
EOF
}

# GDB reads and indexes the separate debug files of the libraries it loads (glibc's, libc6-dbg:
# most of GDB's time on a small program). The in-process recording needs only its frames' lines:
# with memdump-symbolize built, GDB is told to read none, and memdump reads the lines of the
# frames the dump holds from the same files at the end (gdb_ext/symbolize/, docs/recorder.md).
early=()
if [[ "$breakpoints" -eq 0 && -x "$symbolizer" ]]; then
    early=(-iex "set debug-file-directory")
else
    symbolizer=""
fi

gdb_rc=0
if [[ -n "$pid" ]]; then
    # Attach: GDB runs in its own session (a Ctrl-C on the terminal reaches this script only, never
    # GDB in the middle of a breakpoint's Python); the script asks it to stop through a FIFO, which
    # GDB's side also reads as a stop when this script dies (its last writer goes away).
    stop_fifo="${work}/stop"
    mkfifo "$stop_fifo"
    exec 5<>"$stop_fifo"
    {
        common_settings
        # GDB's interrupt is one SIGINT it stops for and does not pass; a SIGINT someone else sends
        # during the recording is passed on by memdump (see gdb_ext/dbgkit/memdump/window.py).
        echo "handle SIGINT stop print nopass"
        memdump_start
        emit <<'EOF'
python
import os
from dbgkit.memdump import window as memdump_window
_for = os.environ.get("MEMDUMP_SH_FOR")
memdump_window.begin(os.environ["MEMDUMP_SH_STOP"], float(_for) if _for else None, 3,
                    os.environ["MEMDUMP_SH_STARTED"])
end
while $_memdump_window()
  if $_memdump_window_signal
    signal SIGINT
  else
    continue
  end
end
python memdump_window.end()
EOF
        write_dump_path
        write_status 0
    } >"$commands"
    # Said once the recording has begun (not when attaching fails).
    if [[ -n "$window" ]]; then
        started="${me}: recording process ${pid} for ${window} s (or until SIGINT or SIGTERM)"
    else
        started="${me}: recording process ${pid} until SIGINT (Ctrl-C) or SIGTERM"
    fi
    setsid_path="$(type -P setsid || true)"
    trap 'printf x >&5 || true' INT TERM
    MEMDUMP_SH_STATUS="$status_file" MEMDUMP_SH_DUMP="$dump_file" MEMDUMP_SH_STOP="$stop_fifo" \
        MEMDUMP_SH_FOR="$window" MEMDUMP_SH_STARTED="$started" MEMDUMP_SYMBOLIZE="$symbolizer" \
        ${setsid_path:+"$setsid_path"} "$gdb_path" -nx -batch "${early[@]}" -x "$commands" -p "$pid" \
        3>&2 </dev/null >"$log" 2>&1 5>&- &
    gdb_pid=$!
    while :; do
        gdb_rc=0
        wait "$gdb_pid" || gdb_rc=$?
        # A trapped signal ends `wait` early: wait again while GDB winds the recording up.
        kill -0 "$gdb_pid" 2>/dev/null || break
    done
    trap - INT TERM
    exec 5>&-
else
    program="$1"
    shift
    # argv[0] as typed (a shell passes it so); the file as a shell finds it.
    argv0="$program"
    if [[ "$program" == */* ]]; then
        [[ -e "$program" ]] || bad_usage "${program}: no such file"
    else
        resolved="$(type -P -- "$program" || true)"
        [[ -n "$resolved" ]] || bad_usage "${program}: command not found"
        program="$resolved"
    fi
    [[ -f "$program" ]] || bad_usage "${program}: not a regular file"
    [[ -x "$program" ]] || bad_usage "${program}: permission denied (not executable)"
    args=("$@")
    # A #! script runs its interpreter, as execve(2) does: argv becomes INTERPRETER [ARG] SCRIPT
    # ARGS... (the script as passed to execve, argv[0] dropped), up to 4 levels like Linux.
    for level in 0 1 2 3 4 5; do
        magic=""
        LC_ALL=C IFS= read -r -n 4 magic <"$program" 2>/dev/null || true
        if [[ "$magic" == $'\x7fELF' ]]; then
            break
        fi
        if [[ "$magic" != '#!'* ]]; then
            [[ "$level" -eq 0 ]] \
                || cannot "${program}: not an executable program (neither ELF nor a #! script)"
            # execve(2) refuses it (ENOEXEC); a shell, and execvp(3), then run it as a script with
            # /bin/sh, and so does memdump.sh, unless it is binary: a NUL in its first line (of 80
            # bytes at most), which bash refuses ("cannot execute binary file").
            nuls="$(LC_ALL=C head -c 80 -- "$program" | LC_ALL=C head -n 1 | LC_ALL=C tr -dc '\000' | wc -c)"
            [[ "$nuls" -eq 0 ]] \
                || cannot "${program}: cannot execute binary file (neither ELF nor a #! script)"
            args=("$program" "${args[@]}")
            argv0="/bin/sh"
            program="/bin/sh"
            break
        fi
        [[ "$level" -lt 5 ]] || cannot "${program}: too many levels of #! interpreters"
        line=""
        IFS= read -r line < <(LC_ALL=C head -c 256 -- "$program") || true
        line="${line#\#!}"
        line="${line#"${line%%[!$' \t']*}"}"
        interpreter="${line%%[$' \t']*}"
        interpreter_arg="${line:${#interpreter}}"
        interpreter_arg="${interpreter_arg#"${interpreter_arg%%[!$' \t']*}"}"
        interpreter_arg="${interpreter_arg%"${interpreter_arg##*[!$' \t']}"}"
        [[ -n "$interpreter" ]] || cannot "${program}: the #! line names no interpreter"
        [[ -e "$interpreter" ]] || cannot "${program}: bad interpreter ${interpreter}: no such file"
        [[ -f "$interpreter" && -x "$interpreter" ]] \
            || cannot "${program}: bad interpreter ${interpreter}: not an executable file"
        args=(${interpreter_arg:+"$interpreter_arg"} "$program" "${args[@]}")
        argv0="$interpreter"
        program="$interpreter"
    done
    # GDB would look a name without a slash up in PATH; the kernel takes it from the directory.
    [[ "$program" == */* ]] || program="./${program}"
    python_path="/usr/bin/python3"
    [[ -x "$python_path" ]] || python_path="$(type -P python3 || true)"
    [[ -n "$python_path" ]] || cannot "python3 is not installed"

    # GDB starts the program through /bin/sh and its exec-wrapper. The wrapper, exec.py, gives the
    # program the start environment exactly (sh drops names that are no shell identifiers, adds PWD;
    # GDB adds LINES and COLUMNS), argv[0] as typed (GDB passes the absolute path), and the script's
    # stdout and stderr, saved as fds 3 and 4 (GDB's own are the log).
    printf '%s\0' "${start_env[@]}" >"${work}/env"
    printf '%s' "$argv0" >"${work}/argv0"
    emit >"${work}/exec.py" <<'EOF'
import os
import sys

here = os.path.dirname(os.path.abspath(sys.argv[0]))
with open(os.path.join(here, "env"), "rb") as fh:
    entries = fh.read().split(b"\0")[:-1]
env = dict(entry.split(b"=", 1) for entry in entries)
# memdump's in-process recorder, which GDB preloads for the program (it takes itself out of
# the program's LD_PRELOAD as it starts: the program sees its environment as typed)
ours = [p for p in os.environ.get("LD_PRELOAD", "").split(":") if p.endswith("/libmemdump_recorder.so")]
if ours:
    env[b"LD_PRELOAD"] = b":".join([os.fsencode(ours[0])] + ([env[b"LD_PRELOAD"]] if env.get(b"LD_PRELOAD") else []))
with open(os.path.join(here, "argv0"), "rb") as fh:
    argv0 = fh.read()
path = os.fsencode(sys.argv[1])
os.dup2(3, 1)
os.dup2(4, 2)
os.close(3)
os.close(4)
try:
    os.execve(path, [argv0, *(os.fsencode(arg) for arg in sys.argv[2:])], env)
except OSError as exc:
    sys.stderr.write(f"{os.environ['MEMDUMP_SH_NAME']}: {sys.argv[1]}: {exc.strerror}\n")
    sys.exit(127)
EOF
    {
        common_settings
        echo "set startup-with-shell on"
        echo "set exec-wrapper $(sh_quote "$python_path") -I -S $(sh_quote "${work}/exec.py")"
        memdump_start
        echo "run"
        emit <<'EOF'
python
import gdb
from dbgkit.memdump import accessfault
while gdb.selected_inferior().pid:
    accessfault.resume()  # continue; past a guard page's fault, the access let through once
end
EOF
        write_dump_path
        [[ "$children" -eq 1 ]] || report_in_gdb
        write_status 125
    } >"$commands"
    # GDB starts the program with $SHELL: make it /bin/sh whatever the user's shell is.
    terminal=0
    [[ ! -t 2 ]] || terminal=1
    env -i -- "${start_env[@]}" SHELL=/bin/sh MEMDUMP_SH_NAME="$me" MEMDUMP_SH_STATUS="$status_file" \
        MEMDUMP_SH_DUMP="$dump_file" ${symbolizer:+MEMDUMP_SYMBOLIZE="$symbolizer"} \
        MEMDUMP_SH_OUTPUT="$dump" MEMDUMP_SH_REPORT_TEXT="$report" MEMDUMP_SH_JSON="$json" \
        MEMDUMP_SH_COMPACT="$compact" MEMDUMP_SH_TERMINAL="$terminal" \
        MEMDUMP_SH_REPORT="$report_out" MEMDUMP_SH_REPORT_STATUS="$report_status" \
        MEMDUMP_SH_VALGRIND="$vg_file" "$gdb_path" -nx -batch "${early[@]}" -x "$commands" --args "$program" "${args[@]}" \
        3>&1 4>&2 >"$log" 2>&1 || gdb_rc=$?
fi

# The dump: the -o given, else the path memdump's status reported; none when no recording started.
used=""
if [[ -s "$dump_file" ]]; then
    used="${dump:-$(<"$dump_file")}"
fi
grep -E '^memdump: (warning|error|[^ ].*(warning|error))' "$log" >&2 || true
if [[ ! -s "$status_file" ]]; then
    if [[ -n "$pid" ]]; then
        why="$(sed -n 's/^ptrace: \(.*\)\.$/\1/p' "$log" | head -n 1)"
        if [[ -n "$why" ]]; then
            cannot "cannot attach to process ${pid}: ${why}"
        fi
        why="$(grep -E '^memdump: ' "$log" | grep -v -E '^memdump: (recording process|armed)' \
            | tail -n 1 || true)"
        if [[ -n "$why" ]]; then
            cannot "process ${pid}: ${why}"
        fi
    fi
    echo "${me}: recording failed (gdb exited with ${gdb_rc}); GDB said:" >&2
    sed 's/^/    /' "$log" >&2
    exit 125
fi
status="$(<"$status_file")"
if [[ -z "$used" ]]; then
    echo "${me}: memdump wrote no dump; GDB said:" >&2
    sed 's/^/    /' "$log" >&2
    exit 125
fi
[[ "$vg_quiet" -eq 1 ]] || echo "${me}: dump: ${used}" >&2
dumps=("$used")
# --children: the dumps the recorder wrote beside the program's for its children (STEM.PID.memdump,
# STEM.PID-K.memdump: docs/recorder.md), in this run (newer than this run's GDB script)
if [[ "$children" -eq 1 ]]; then
    stem="${used%.memdump}"
    for child in "$stem".*.memdump; do
        child_pid="${child#"$stem".}"
        child_pid="${child_pid%.memdump}"
        if [[ "$child_pid" =~ ^[0-9]+(-[0-9]+)?$ && "$child" -nt "$commands" ]]; then
            echo "${me}: dump: ${child} (child process ${child_pid%-*})" >&2
            if [[ -d "/proc/${child_pid%-*}" ]]; then  # its recording may go on: never compacted
                echo "${me}: ${child}: kept as text (process ${child_pid%-*} is still running)" >&2
            else
                dumps+=("$child")
            fi
        fi
    done
fi

# --redzones: a changed red zone or freed block (an hc record, docs/heap-errors.md) is an error
# of the run, in any of its dumps: exit status 99, or --error-exitcode's N (0: the program's
# status), as valgrind's. The dump is text until compacted
# below, unless GDB compacted a small one already: then its text is decoded.
redzone_errors() {
    if [[ "$(head -c 7 -- "$1")" == MEMDUMP ]]; then
        LC_ALL=C grep -q -a -m1 '^hc ' -- "$1"
    else
        PYTHONPATH="${analyzer_dir}${PYTHONPATH:+:${PYTHONPATH}}" /usr/bin/python3 -P -S \
            -m memdump_analyzer --text "$1" | LC_ALL=C grep -q -a -m1 '^hc '
    fi
}
if [[ "$redzones_set" -eq 1 && "${vg_exitcode:-99}" -ne 0 ]]; then
    for recorded in "${dumps[@]}"; do  # the program's, and its children's with --children
        if redzone_errors "$recorded"; then
            status="${vg_exitcode:-99}"
            echo "${me}: heap corruption found (red zones) in ${recorded}: exit status ${status}" >&2
            break
        fi
    done
fi

# The reports (the text one, --json's) and the compaction of the dumps (docs/dump-format.md,
# "Compact encoding": each beside itself, renamed over it when complete) in one analyser: the
# dump is read once for both reports, and compacted meanwhile on the second core (a report that
# opens the dump again after the rename reads the same records from the compact file). A
# compaction that fails leaves the text dump, says why, and changes no exit status. A small
# dump's were made in GDB's Python already (report_in_gdb): what they said is shown here.
to_compact=()
[[ "$compact" -eq 0 ]] || to_compact=("${dumps[@]}")
if [[ -s "$report_status" ]]; then
    cat -- "$report_out" >&2
    failed="$(<"$report_status")"
elif [[ "$report" -eq 1 || -n "$json" || ${#to_compact[@]} -gt 0 || "$valgrind" -eq 1 ]]; then
    failed=0
    # -S: no `site`; huge pages for malloc's large blocks: as scripts/memdump-analyze
    GLIBC_TUNABLES="${GLIBC_TUNABLES:+${GLIBC_TUNABLES}:}glibc.malloc.hugetlb=1" \
    PYTHONPATH="${analyzer_dir}${PYTHONPATH:+:${PYTHONPATH}}" MEMDUMP_SH_VALGRIND="$vg_file" /usr/bin/python3 -P -S -c '
import sys
from memdump_analyzer.shreport import main
sys.exit(main(sys.argv[1:]))
' "$me" "$used" "$report" "$json" "${to_compact[@]}" >&2 || failed=$?
fi
if [[ "${failed:-0}" -eq 3 ]]; then  # valgrind's output counted errors
    exit "${vg_exitcode:-$status}"
elif [[ "${failed:-0}" -eq 2 ]]; then
    echo "${me}: the JSON report failed" >&2
    exit 125
elif [[ "${failed:-0}" -ne 0 ]]; then
    echo "${me}: the report failed" >&2
    exit 125
fi
exit "$status"
