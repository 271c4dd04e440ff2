#!/usr/bin/env bash
# @brief Fuzz libmemdump_core's reader and replay (analyzer/native/fuzz_replay.c), or with -c its
# compact encoding's decoder (fuzz_compact.c), or with -d the replay and the views' pass reading a
# compact dump through the decoder's direct output (fuzz_replay.c built with FUZZ_DIRECT), with
# libFuzzer, under AddressSanitizer and UndefinedBehaviorSanitizer.
#
# Builds the target with clang into a fresh temporary directory, seeds it with the analyser's
# fixture dumps (their lines after the version line) and a dictionary of the format's tags, and runs
# RUNS inputs (default 1,000,000; the test suite's budget). Any crash, sanitizer report or leak
# stops the run with libFuzzer's report and the input that did it, and this script exits non-zero.
#
#   scripts/fuzz-core.sh                 # 1,000,000 inputs
#   scripts/fuzz-core.sh -r 50000000     # the longer run docs/report-format.md records
#   scripts/fuzz-core.sh -t 600          # for 600 seconds
#   scripts/fuzz-core.sh -c              # the compact decoder, seeded with the fixtures compacted
#   scripts/fuzz-core.sh -d              # the replay and the views' pass on compact blocks
set -euo pipefail

root_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs=1000000
seconds=0
usage() {
    echo "usage: scripts/fuzz-core.sh [-c | -d] [-r RUNS] [-t SECONDS] [-k]" >&2
}
keep=0
target=replay
while getopts "r:t:kcdh" opt; do
    case "$opt" in
        c) [[ $target == direct ]] && { echo "fuzz-core.sh: -c and -d are two targets: give one" >&2; exit 2; }
           target=compact ;;
        d) [[ $target == compact ]] && { echo "fuzz-core.sh: -c and -d are two targets: give one" >&2; exit 2; }
           target=direct ;;
        r) runs="$OPTARG" ;;
        t) seconds="$OPTARG" ;;
        k) keep=1 ;;
        h) usage; exit 0 ;;
        *) usage; exit 2 ;;
    esac
done
if ! [[ "$runs" =~ ^[0-9]+$ && "$seconds" =~ ^[0-9]+$ ]]; then
    echo "fuzz-core.sh: -r and -t take a number, not '$runs' / '$seconds'" >&2
    exit 2
fi
if ! command -v clang >/dev/null; then
    echo "fuzz-core.sh: clang is not installed (scripts/setup.sh installs it with the test packages)" >&2
    exit 2
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/memdump-fuzz.XXXXXX")"
if [[ $keep -eq 0 ]]; then
    trap 'rm -rf "$work"' EXIT
else
    echo "fuzz-core.sh: keeping $work" >&2
fi
native="$root_dir/analyzer/native"
mkdir "$work/corpus"
if [[ $target == compact ]]; then
    clang -g -O1 -D_GNU_SOURCE -std=c11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
        -I"$native" "$native"/fuzz_compact.c "$native"/compact.c "$native"/compactdec.c -lz -llzma \
        -o "$work/fuzz_compact"
    # seeds: each fixture compacted (first byte 1: a whole file) and its payload (0: a block's,
    # decoded to text; 2: to the replay's direct output), and version 1.0's fixture
    PYTHONPATH="$root_dir/analyzer" python3 - "$work/corpus" "$root_dir"/analyzer/tests/fixtures/*.memdump <<'PY'
import io, sys
from pathlib import Path
from memdump_analyzer import compact
for path in map(Path, sys.argv[2:]):
    text = path.read_bytes()
    out = io.BytesIO()
    compact.encode(io.BytesIO(text), out)
    (Path(sys.argv[1]) / f"{path.stem}.file").write_bytes(b"\1" + out.getvalue())
    enc = compact._Encoder()
    for line in compact._pieces(io.BytesIO(text)):
        enc.line(line)
    (Path(sys.argv[1]) / f"{path.stem}.payload").write_bytes(b"\0" + enc.payload())
    (Path(sys.argv[1]) / f"{path.stem}.direct").write_bytes(b"\2" + enc.payload())
# and a file of version 1.0 (blocks under xz), which the decoder still reads
old = Path(sys.argv[2]).parent / "inprocess-1.0.compact"
(Path(sys.argv[1]) / "inprocess-1.0.file").write_bytes(b"\1" + old.read_bytes())
PY
    fuzzer="$work/fuzz_compact"
    max_len=8192
else
    direct=()
    [[ $target == direct ]] && direct=(-DFUZZ_DIRECT)
    clang -g -O1 -D_GNU_SOURCE -DBUFFER=4096 -DMAX_ID=65536 "${direct[@]}" -std=c11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
        -I"$native" "$native"/fuzz_replay.c "$native"/memdump_core.c "$native"/records.c \
        "$native"/heap.c "$native"/tables.c "$native"/figures.c "$native"/series.c "$native"/tagviews.c \
        "$native"/moments.c "$native"/snapshots.c "$native"/htexport.c "$native"/compact.c "$native"/compactdec.c "$native"/compactfeed.c \
        -lz -llzma -lpthread \
        -o "$work/fuzz_replay"
fi
if [[ $target == direct ]]; then
    # seeds: each fixture's payload after each first byte the text seeds below take (the replay,
    # its exports' counts, the views' pass in each of its steps, heaptrack's events)
    PYTHONPATH="$root_dir/analyzer" python3 - "$work/corpus" "$root_dir"/analyzer/tests/fixtures/*.memdump <<'PY'
import io, sys
from pathlib import Path
from memdump_analyzer import compact
for path in map(Path, sys.argv[2:]):
    enc = compact._Encoder()
    for line in compact._pieces(io.BytesIO(path.read_bytes())):
        enc.line(line)
    for first in (0x00, 0x0a, 0x0c, 0x23, 0x62, 0xa2, 0xe2, 0x68):
        (Path(sys.argv[1]) / f"{first:02x}-{path.stem}").write_bytes(bytes([first]) + enc.payload())
PY
    fuzzer="$work/fuzz_replay"
    max_len=8192
elif [[ $target == replay ]]; then
    for dump in "$root_dir"/analyzer/tests/fixtures/*.memdump; do
        tail -n +2 "$dump" > "$work/corpus/$(basename "$dump")"
        # the same after a comment: its first byte, `#`, asks fuzz_replay.c for the views' pass
        { echo "#"; tail -n +2 "$dump"; } > "$work/corpus/views-$(basename "$dump")"
        # after `b`, 0xa2 and 0xe2 (bit 1 set, bits 6 and 7 giving 1, 2 and 3): the views' step
        # of `peak` (the stacks' figures alone), of `lifetimes` alone and of the heap map's
        # moments alone
        { echo "b"; tail -n +2 "$dump"; } > "$work/corpus/peak-$(basename "$dump")"
        { printf '\xe2\n'; tail -n +2 "$dump"; } > "$work/corpus/moments-$(basename "$dump")"
        { printf '\xa2\n'; tail -n +2 "$dump"; } > "$work/corpus/lifetimes-$(basename "$dump")"
        # and after a line `h` (bit 3 set, bits 1 and 2 clear): for heaptrack's events
        { echo "h"; tail -n +2 "$dump"; } > "$work/corpus/heaptrack-$(basename "$dump")"
    done
    fuzzer="$work/fuzz_replay"
    max_len=4096
fi
# the format's tags and the words its records hold, for the mutations
{
    for word in "e " "t " "+ " "- " "+n " "+a " "-n " "-a " "+c " "+r " "+p " "+l " "+m " "n " \
                "f " "fi " "fs " "s " "i " \
                "p " "end " "c " "g " "u " "r " "scan " "lk " "lw " "# " "0x" " 0x0" \
                " malloc " " calloc " " realloc " " reallocarray " " free " " posix_memalign " \
                " aligned_alloc " " memalign " " new " " new[] " " delete " " delete[] " \
                " custom_alloc " " custom_free " " exec " " signal " " exit "; do
        printf '"%s"\n' "$word"
    done
} > "$work/tags.dict"

export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
args=(-seed=1 -max_len="$max_len" -dict="$work/tags.dict" -artifact_prefix="$work/" -print_final_stats=1)
if [[ "$seconds" -gt 0 ]]; then
    args+=(-max_total_time="$seconds")
else
    args+=(-runs="$runs")
fi
if ! "$fuzzer" "${args[@]}" "$work/corpus" 2>"$work/log"; then
    tail -n 40 "$work/log" >&2
    for crash in "$work"/crash-* "$work"/leak-* "$work"/timeout-*; do
        [[ -e "$crash" ]] && cp "$crash" . && echo "fuzz-core.sh: the input is ./$(basename "$crash")" >&2
    done
    exit 1
fi
grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$work/log" >&2 || true
echo "fuzz-core.sh: no crash, sanitizer report or leak" >&2
