#!/usr/bin/env bash
# @brief Install what the toolkit needs on Debian 12: missing Debian packages and a project-local venv.
#
# Idempotent and quiet when everything is present. Debian packages are installed with apt-get only when
# missing (root needed then); Python test dependencies go into .venv (built on /usr/bin/python3, the
# interpreter GDB embeds) from requirements-dev.txt, reinstalled only when that file changes.
set -euo pipefail
# The script's stderr, kept for what it says while an apt-get call's own output goes to /dev/null.
exec 3>&2

root_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv_dir="${root_dir}/.venv"
requirements="${root_dir}/requirements-dev.txt"

# Debian packages and why. `make demo` needs only the first group; `make test` needs them all.
#   gdb           runs and records the program (memdump)
#   libc6-dbg     glibc's debug info: file:line inside libc and names of its static functions
#   g++ make cmake ninja-build   the C/C++ build (g++ brings gcc and binutils)
#   python3       the analyser (GDB embeds /usr/bin/python3 too)
#   zlib1g-dev liblzma-dev   the analyser's C library: the compact dumps' CRC-32 and xz
demo_packages=(gdb libc6-dbg g++ make cmake ninja-build python3 zlib1g-dev liblzma-dev)
#   gcc binutils  named, not only implied: the C programs, and readelf for the CFI unwinder's tests
#   libgtest-dev  GoogleTest for the C++ tests
#   python3-venv  the test virtualenv .venv
#   (shellcheck)  lints the shell scripts in `make test`
#   valgrind      reference answers in the benchmarks and cross-checks; ms_print reads --format massif
#   golang-go     `go tool pprof` reads --format pprof back in the exports' tests (Debian puts go in
#                 /usr/lib/go/bin; the tests look there, and on PATH)
#   chromium      loads --format html headless in its tests (console, zoom, screenshot)
#   strace        counts futex system calls in the shared-memory queue benchmark (bench-shmemq.py)
#   clang libdw-dev pkgconf   pretty_exception: Clang test builds, libdw symbolises traces, pkg-config test;
#                 libdw also builds memdump-symbolize (glibc's frames without GDB reading libc6-dbg)
#   libdeflate0   memdump-symbolize inflates libc6-dbg's compressed debug sections, and the analyser
#                 a compact dump's blocks, with it, about 3x zlib's speed, when it is there (loaded at
#                 run time; zlib otherwise)
#   libclang-rt-14-dev   Clang 14's sanitizer runtimes (ubsan_demos' *-clang-ubsan builds link them).
#                 Debian makes it only a Recommends of clang, and recommends are not installed here.
#   llvm-14       llvm-symbolizer, which Clang's sanitizers run to print file:line in their reports
#                 (also only a Recommends of clang)
#   heaptrack     the reference of the analyser's views (tests/e2e/test_views_vs_heaptrack.py: heaptrack
#                 and heaptrack_print); the in-process recorder's benchmark compares memdump with it
#   file dpkg-dev the Debian package's build (cpack -G DEB: its dependencies found by dpkg-shlibdeps,
#                 which needs file(1); tests/e2e/test_install.py builds and unpacks it)
test_packages=("${demo_packages[@]}" gcc binutils libgtest-dev python3-venv shellcheck valgrind strace
               clang libclang-rt-14-dev llvm-14 libdw-dev libdeflate0 pkgconf golang-go
               chromium heaptrack file dpkg-dev)
# `make bench` needs the test packages (heaptrack included) and
#   cppcheck      a real program bench-analyzer.py --recorded records with memdump and with heaptrack
bench_packages=("${test_packages[@]}" cppcheck)

usage() {
    cat <<EOF
usage: scripts/setup.sh [--demo|--bench] [--check] [-h|--help]

Install the Debian packages and the Python test dependencies the toolkit needs, only when missing.
  --demo      only what 'make demo' needs: the recorder, the analyser and a C++ build (no virtualenv)
  --bench     what 'make bench' needs (the test packages)
  --check     only report what is missing; exit 1 if anything is
  -h, --help  show this help
EOF
}

check_only=0
demo_only=0
bench=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --check) check_only=1 ;;
        --demo) demo_only=1 ;;
        --bench) bench=1 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "setup.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

if [[ $demo_only -eq 1 && $bench -eq 1 ]]; then
    echo "setup.sh: --demo and --bench cannot be combined" >&2; usage >&2; exit 2
fi
if [[ $demo_only -eq 1 ]]; then
    packages=("${demo_packages[@]}")
elif [[ $bench -eq 1 ]]; then
    packages=("${bench_packages[@]}")
else
    packages=("${test_packages[@]}")
fi

# Another package manager may hold apt's locks: unattended-upgrades on every fresh machine, a user's
# apt-get. Each apt-get call waits for them (up to lock_timeout seconds) instead of failing at once:
# dpkg's lock through apt's own DPkg::Lock::Timeout; the package lists' lock, which `apt-get update`
# does not wait for (apt 2.6), by watching /proc/locks before the call, which also lets us say once
# what we wait for (apt's own "Waiting for cache lock" lines go where its output goes, to /dev/null).
lock_timeout=600
apt_locks=(/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock)
said_waiting=0

# The holder of one of apt's locks, as "PID LOCKFILE"; fails when none is held. /proc/locks names a
# lock by the file's device (hex major:minor) and inode; "->" lines are waiters, not holders.
apt_lock_holder() {
    local file key line major minor inode
    local -a f
    for file in "${apt_locks[@]}"; do
        [[ -e "$file" ]] || continue
        read -r major minor inode < <(stat -L -c '%Hd %Ld %i' "$file") || continue
        key="$(printf '%02x:%02x:%s' "$major" "$minor" "$inode")"
        while IFS= read -r line; do
            read -r -a f <<<"$line"
            [[ "${f[1]:-}" != "->" && "${f[5]:-}" == "$key" ]] || continue
            echo "${f[4]} ${file}"
            return 0
        done </proc/locks
    done
    return 1
}

wait_for_apt_locks() {
    local holder pid file waited=0
    while holder="$(apt_lock_holder)"; do
        pid="${holder%% *}"
        file="${holder#* }"
        if [[ $said_waiting -eq 0 ]]; then
            echo "setup.sh: waiting for process ${pid} ($(cat "/proc/${pid}/comm" 2>/dev/null || echo '?'))" \
                "to release ${file} (another package manager is running; up to ${lock_timeout} s)" >&3
            said_waiting=1
        fi
        if [[ $waited -ge $lock_timeout ]]; then
            echo "setup.sh: ${file} is still held by process ${pid} after ${lock_timeout} s; run setup.sh again when it is done" >&3
            exit 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
}

apt_get() {
    wait_for_apt_locks
    apt-get -o "DPkg::Lock::Timeout=${lock_timeout}" "$@"
}

missing=()
for pkg in "${packages[@]}"; do
    status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
    if [[ "$status" != "install ok installed" ]]; then
        missing+=("$pkg")
    fi
done

if [[ ${#missing[@]} -gt 0 ]]; then
    if [[ $check_only -eq 1 ]]; then
        echo "setup.sh: missing Debian packages: ${missing[*]}" >&2
        exit 1
    fi
    if [[ $(id -u) -ne 0 ]]; then
        echo "setup.sh: missing Debian packages: ${missing[*]}; run as root, or: sudo apt-get install ${missing[*]}" >&2
        exit 1
    fi
    echo "setup.sh: installing ${missing[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    # A clean root has no package lists yet: the first try fails quietly, then update and try again.
    if ! apt_get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
        apt_get update -q >/dev/null
        apt_get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
    fi
fi

[[ $demo_only -eq 1 ]] && exit 0

# The venv is keyed on the requirements file: rebuilt only when it changes.
stamp="${venv_dir}/.requirements.sha256"
want="$(sha256sum "$requirements" | cut -d' ' -f1)"
if [[ -x "${venv_dir}/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    exit 0
fi
if [[ $check_only -eq 1 ]]; then
    echo "setup.sh: the test virtualenv .venv is missing or out of date" >&2
    exit 1
fi
echo "setup.sh: preparing the test virtualenv in .venv" >&2
/usr/bin/python3 -m venv "$venv_dir"
if ! "${venv_dir}/bin/pip" install -q --disable-pip-version-check -r "$requirements"; then
    echo "setup.sh: could not install the Python test dependencies from requirements-dev.txt (is PyPI reachable?)" >&2
    exit 1
fi
echo "$want" >"$stamp"
