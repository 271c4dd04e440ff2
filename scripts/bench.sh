#!/usr/bin/env bash
# @brief Run a program N times and report its wall time: minimum, maximum, average and median (the seeds' runner, plus the median).
#
# Each run is a fresh process; its output goes to /dev/null. Time is the wall time of the whole
# process, measured with the nanosecond clock of `date +%s%N`, so it includes process start-up
# (about a millisecond), as the seeds' runner did. A run that exits non-zero stops the script with
# that status.
set -euo pipefail

me="bench.sh"

usage() {
    cat <<EOF
usage: scripts/bench.sh [--runs N] [--] PROGRAM [ARGS...]
       scripts/bench.sh PROGRAM [ARGS...] --runs N

Run PROGRAM with ARGS N times (default 5) and print, in milliseconds, the minimum, maximum,
average and median wall time of the runs. --runs may come first or last; put -- before PROGRAM
when one of its own arguments is --runs.

  --runs N   number of runs (a positive integer)
  --help     this text

Exit status: 0, the status of a failing run, or 2 on a bad argument.
EOF
}

die_usage() {
    printf '%s: %s\n' "$me" "$1" >&2
    usage >&2
    exit 2
}

parse_runs() {
    [[ "$1" =~ ^[1-9][0-9]{0,5}$ ]] || die_usage "--runs: not a positive integer: '$1'"
    runs="$1"
}

runs=5
command=()
while (($# > 0)); do
    case "$1" in
        --help | -h)
            usage
            exit 0
            ;;
        --runs)
            (($# >= 2)) || die_usage "--runs needs a value"
            parse_runs "$2"
            shift 2
            ;;
        --runs=*)
            parse_runs "${1#--runs=}"
            shift
            ;;
        --)
            shift
            command+=("$@")
            break
            ;;
        -*)
            ((${#command[@]} > 0)) || die_usage "unknown option '$1'"
            command+=("$1")
            shift
            ;;
        *)
            command+=("$1")
            shift
            ;;
    esac
done
((${#command[@]} > 0)) || die_usage "no program given"
command -v -- "${command[0]}" >/dev/null || die_usage "not a program: '${command[0]}'"

times=()
for ((i = 0; i < runs; i++)); do
    start=$(date +%s%N)
    status=0
    "${command[@]}" >/dev/null || status=$?
    end=$(date +%s%N)
    if ((status != 0)); then
        printf '%s: run %d of %s exited with status %d\n' "$me" "$((i + 1))" "${command[*]}" \
            "$status" >&2
        exit "$status"
    fi
    times+=("$(((end - start) / 1000))") # microseconds
done

# min, max, average and median of the run times, in milliseconds with three decimals.
printf '%s\n' "${times[@]}" | sort -n | awk -v program="${command[*]}" -v runs="$runs" '
    { t[NR] = $1; sum += $1 }
    END {
        median = (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2
        printf "Program executed : %s\n", program
        printf "Iteration times : %d\n", runs
        printf "Maximum time : %.3f milliseconds\n", t[NR] / 1000
        printf "Minimum time : %.3f milliseconds\n", t[1] / 1000
        printf "Average time : %.3f milliseconds\n", sum / NR / 1000
        printf "Median time : %.3f milliseconds\n", median / 1000
    }'
