#!/usr/bin/env bash
# @brief CTest check: tcp_echo_server --mode MODE with tcp_echo_clients, then SIGTERM and exit 0.
set -euo pipefail

usage() {
    echo "usage: e2e_check.sh SERVER CLIENTS MODE" >&2
}

fail() {
    echo "e2e_check.sh: $*" >&2
    for f in server.out server.err clients.out clients.err; do
        if [[ -f "${work}/${f}" ]]; then
            echo "--- ${f}" >&2
            cat "${work}/${f}" >&2
        fi
    done
    exit 1
}

[[ $# -eq 3 ]] || { usage; exit 2; }
server="$1"
clients="$2"
mode="$3"

work="$(mktemp -d)"
pid=""
cleanup() {
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -rf -- "$work"
}
trap cleanup EXIT

: >"${work}/server.out"
"$server" --mode "$mode" >"${work}/server.out" 2>"${work}/server.err" &
pid=$!

# The first line, within 10 s.
first=""
for _ in $(seq 200); do
    first="$(head -n 1 "${work}/server.out")"
    [[ "$first" == "listening on "* ]] && break
    kill -0 "$pid" 2>/dev/null || fail "the server exited before its first line"
    sleep 0.05
done
port="$(sed -n "1s/^listening on 127\\.0\\.0\\.1:\\([0-9]*\\) pid ${pid}\$/\\1/p" "${work}/server.out")"
[[ -n "$port" ]] || fail "first line is not 'listening on 127.0.0.1:PORT pid ${pid}': '${first}'"

timeout 60 "$clients" --port "$port" --clients 8 --pingpongs 20 --payload 100 \
    --server-pid "$pid" >"${work}/clients.out" 2>"${work}/clients.err" \
    || fail "tcp_echo_clients failed"
grep -qx 'round trips 160 of 160' "${work}/clients.out" || fail "not 160 round trips"
grep -q '^disconnections 0 ' "${work}/clients.out" || fail "disconnections"
grep -q '^errors 0 ' "${work}/clients.out" || fail "errors"
grep -q "^server context switches during the run (pid ${pid}):" "${work}/clients.out" \
    || fail "no server context-switch table"
if [[ "$mode" == threads ]]; then
    named='^tpc-client-[1-8] '
else
    named='^reactor '
fi
[[ "$(grep -c "$named" "${work}/clients.out")" -ge 1 ]] || fail "no ${named} row in the clients' table"

kill -TERM "$pid"
for _ in $(seq 200); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
done
kill -0 "$pid" 2>/dev/null && fail "the server did not exit within 10 s of SIGTERM"
status=0
wait "$pid" || status=$?
pid=""
[[ "$status" -eq 0 ]] || fail "the server exited with ${status}"
grep -qx 'shutting down on SIGTERM' "${work}/server.out" || fail "no shutdown line"
grep -q '^context switches (shutdown, ' "${work}/server.out" || fail "no shutdown table"
# Peers that left may or may not have been noticed before SIGTERM: closed + open = 8.
counters="$(sed -n 's/^peers accepted 8, closed \([0-9]*\), dropped 0, refused 0, open at shutdown \([0-9]*\); requests 160$/\1 \2/p' "${work}/server.out")"
[[ -n "$counters" ]] || fail "wrong server counters"
read -r closed open <<<"$counters"
[[ $((closed + open)) -eq 8 ]] || fail "closed ${closed} + open ${open} is not 8"
if [[ "$mode" == threads ]]; then
    grep -q '^tpc-accept .* exited ' "${work}/server.out" || fail "no exited tpc-accept row"
    [[ "$(grep -c '^tpc-client-[1-8] .* exited ' "${work}/server.out")" -eq 8 ]] \
        || fail "not 8 exited tpc-client rows"
else
    grep -q '^reactor .* exited ' "${work}/server.out" || fail "no exited reactor row"
fi
[[ ! -s "${work}/server.err" ]] || fail "the server wrote on stderr"
echo "e2e ${mode}: ok (port ${port})"
