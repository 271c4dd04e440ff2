// @brief tcp_echo_clients: N client threads x M verified ping-pongs; RTT, disconnections, errors.
#include "bench_cli.hpp"
#include "context_switches.hpp"
#include "echo_client.hpp"
#include "tcp_servers.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace {

namespace client = dbgkit::targets::client;
namespace ctxsw = dbgkit::targets::ctxsw;
namespace echo = dbgkit::targets::echo;
using Clock = std::chrono::steady_clock;

constexpr const char* kUsage =
    "usage: tcp_echo_clients --port N [--host ADDR] [--clients N] [--pingpongs M]\n"
    "                        [--payload BYTES] [--server-pid PID] [--timeout-ms MS]\n"
    "\n"
    "Starts N client threads; each connects to the echo server, and once all are connected does\n"
    "M ping-pongs with a BYTES payload, waiting for each reply and checking every byte of it.\n"
    "Prints the elapsed time, the round-trip times (average, p50, p99, max), the disconnections\n"
    "(connection reset, errno 104, or closed by the server) and other errors.\n"
    "\n"
    "  --port N          server port (required)\n"
    "  --host ADDR       server IPv4 address (default 127.0.0.1)\n"
    "  --clients N       client threads and connections (default 4)\n"
    "  --pingpongs M     ping-pongs per client (default 100)\n"
    "  --payload BYTES   payload bytes per message (default 32)\n"
    "  --server-pid PID  also print the server's context switches per thread during the run\n"
    "                    (from /proc/PID/task/*/status, read before the first ping and after\n"
    "                    the last reply, while every connection is still open)\n"
    "  --timeout-ms MS   limit for connecting and for each round trip (default 10000)\n"
    "  --help            this text\n"
    "\n"
    "Exit status: 0 when every reply arrived and was right, 1 otherwise, 2 on a bad argument.\n";

const dbgkit::targets::cli::Program kProgram{"tcp_echo_clients", kUsage};

struct Options {
    std::string host = "127.0.0.1";
    std::uint16_t port = 0;
    std::uint64_t clients = 4;
    std::uint64_t pingpongs = 100;
    std::uint32_t payload = 32;
    long server_pid = 0;
    int timeout_ms = 10000;
};

Options parse(int argc, char** argv) {
    namespace cli = dbgkit::targets::cli;
    Options opt;
    bool have_port = false;
    cli::Args args(kProgram, argc, argv);
    while (args.next()) {
        if (args.is("--host")) {
            opt.host = args.value();
        } else if (args.is("--port")) {
            opt.port = static_cast<std::uint16_t>(args.count(1, 65535));
            have_port = true;
        } else if (args.is("--clients")) {
            opt.clients = args.count(1, 100000);
        } else if (args.is("--pingpongs")) {
            opt.pingpongs = args.count(1, 100000000);
        } else if (args.is("--payload")) {
            opt.payload = static_cast<std::uint32_t>(args.count(0, echo::kMaxMaxPayload));
        } else if (args.is("--server-pid")) {
            opt.server_pid = static_cast<long>(args.count(1, 4194304));
        } else if (args.is("--timeout-ms")) {
            opt.timeout_ms = static_cast<int>(args.count(1, 3600000));
        } else {
            args.unknown();
        }
    }
    if (!have_port) {
        cli::usage_error(kProgram, "--port is required");
    }
    in_addr probe{};
    if (inet_pton(AF_INET, opt.host.c_str(), &probe) != 1) {
        cli::usage_error(kProgram, "--host: not an IPv4 address: '" + opt.host + "'");
    }
    return opt;
}

/// Byte I of ping K of client C: differs between clients and pings, so a reply that belongs to
/// another connection or another ping is caught.
std::uint8_t pattern(std::uint64_t c, std::uint64_t k, std::uint32_t i) {
    return static_cast<std::uint8_t>(c * 131 + k * 7 + i);
}

/// The phases every client thread goes through together.
class Phases {
public:
    /// Blocks until PHASE is reached.
    void wait_for(int phase) {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return phase_ >= phase; });
    }
    void advance(int phase) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            phase_ = phase;
        }
        cv_.notify_all();
    }
    /// Blocks until COUNTER reaches COUNT.
    void wait_count(const std::size_t& counter, std::size_t count) {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return counter >= count; });
    }
    /// One more client thread reached the end of a phase.
    void arrive(std::size_t& counter) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            ++counter;
        }
        cv_.notify_all();
    }

    std::size_t connected = 0;
    std::size_t finished = 0;

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    int phase_ = 0;
};

enum Phase { kConnecting = 0, kGo = 1, kClose = 2 };

struct Tally {
    std::vector<std::uint64_t> rtt_ns;
    std::uint64_t reset = 0, closed = 0, wrong = 0, timeouts = 0, connect_failed = 0, other = 0;
};

std::mutex g_report_mutex;
int g_reported = 0;

/// One line on stderr about a client's failure; the first 10 only, then one "more" line.
void report(std::uint64_t c, const std::string& what) {
    std::lock_guard<std::mutex> lock(g_report_mutex);
    ++g_reported;
    if (g_reported <= 10) {
        std::fprintf(stderr, "tcp_echo_clients: client %llu: %s\n",
                     static_cast<unsigned long long>(c), what.c_str());
    } else if (g_reported == 11) {
        std::fprintf(stderr, "tcp_echo_clients: (further client errors are only counted)\n");
    }
}

void run_client(const Options& opt, std::uint64_t c, Phases& phases, Tally& tally) {
    int err = 0;
    const int fd = client::connect_tcp(opt.host, opt.port, opt.timeout_ms, err);
    if (fd < 0) {
        ++tally.connect_failed;
        report(c, std::string("connect: ") + std::strerror(err));
    }
    phases.arrive(phases.connected);
    phases.wait_for(kGo);
    if (fd >= 0) {
        std::vector<std::uint8_t> request, reply;
        tally.rtt_ns.reserve(opt.pingpongs);
        for (std::uint64_t k = 0; k < opt.pingpongs; ++k) {
            request.clear();
            std::vector<std::uint8_t> payload(opt.payload);
            for (std::uint32_t i = 0; i < opt.payload; ++i) {
                payload[i] = pattern(c, k, i);
            }
            echo::encode(request, echo::Type::kRequest, payload.data(), opt.payload);
            const auto start = Clock::now();
            const client::Status s =
                client::exchange(fd, request, opt.payload, reply, opt.timeout_ms, err);
            const auto end = Clock::now();
            if (s == client::Status::kOk && reply != payload) {
                ++tally.wrong;
                report(c, "ping " + std::to_string(k) + ": the echoed payload differs");
                break;
            }
            if (s != client::Status::kOk) {
                std::string what = "ping " + std::to_string(k) + ": " + client::status_name(s);
                switch (s) {
                    case client::Status::kReset: ++tally.reset; break;
                    case client::Status::kClosed: ++tally.closed; break;
                    case client::Status::kBadReply: ++tally.wrong; break;
                    case client::Status::kTimeout: ++tally.timeouts; break;
                    default: ++tally.other; break;
                }
                if (s == client::Status::kReset || s == client::Status::kError) {
                    what += std::string(" (") + std::strerror(err) + ")";
                }
                report(c, what);
                break;
            }
            tally.rtt_ns.push_back(static_cast<std::uint64_t>(
                std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count()));
        }
    }
    phases.arrive(phases.finished);
    phases.wait_for(kClose);  // keep the connection (and the server's thread) until the snapshot
    if (fd >= 0) {
        ::close(fd);
    }
}

double percentile_us(const std::vector<std::uint64_t>& sorted, double p) {
    if (sorted.empty()) {
        return 0;
    }
    // Nearest rank: the smallest value with at least P percent of the values at or below it.
    std::size_t rank = static_cast<std::size_t>(p / 100.0 * static_cast<double>(sorted.size()) +
                                                0.999999);
    rank = std::clamp<std::size_t>(rank, 1, sorted.size());
    return static_cast<double>(sorted[rank - 1]) / 1000.0;
}

}  // namespace

int main(int argc, char** argv) {
    const Options opt = parse(argc, argv);

    // Each client holds one socket; stdio, the /proc reads and a margin need a few more.
    const std::uint64_t needed = opt.clients + 16;
    const std::uint64_t limit = dbgkit::targets::raise_fd_limit();
    if (limit < needed) {
        rlimit lim{};
        getrlimit(RLIMIT_NOFILE, &lim);
        std::fprintf(stderr,
                     "tcp_echo_clients: --clients %llu needs about %llu file descriptors, but "
                     "RLIMIT_NOFILE is %llu (hard limit %llu, which an unprivileged process "
                     "cannot raise); use fewer clients or raise the hard limit (ulimit -Hn)\n",
                     static_cast<unsigned long long>(opt.clients),
                     static_cast<unsigned long long>(needed),
                     static_cast<unsigned long long>(lim.rlim_cur),
                     static_cast<unsigned long long>(lim.rlim_max));
        return 1;
    }

    std::printf("clients %llu, ping-pongs %llu, payload %lu bytes, server %s:%u\n",
                static_cast<unsigned long long>(opt.clients),
                static_cast<unsigned long long>(opt.pingpongs),
                static_cast<unsigned long>(opt.payload), opt.host.c_str(), unsigned{opt.port});
    std::fflush(stdout);

    Phases phases;
    std::vector<Tally> tallies(opt.clients);
    std::vector<std::thread> threads;
    threads.reserve(opt.clients);
    std::uint64_t not_started = 0;
    for (std::uint64_t c = 0; c < opt.clients; ++c) {
        try {
            threads.emplace_back(run_client, std::cref(opt), c, std::ref(phases),
                                 std::ref(tallies[c]));
        } catch (const std::system_error& e) {
            not_started = opt.clients - c;
            std::fprintf(stderr, "tcp_echo_clients: could start only %llu client threads: %s\n",
                         static_cast<unsigned long long>(c), e.what());
            break;
        }
    }
    const std::size_t started = threads.size();
    phases.wait_count(phases.connected, started);
    std::vector<ctxsw::ThreadSwitches> before;
    const std::string proc = "/proc/" + std::to_string(opt.server_pid);
    if (opt.server_pid != 0) {
        before = ctxsw::read_tasks(proc);
    }
    const auto start = Clock::now();
    phases.advance(kGo);
    phases.wait_count(phases.finished, started);
    const std::chrono::duration<double> elapsed = Clock::now() - start;
    std::vector<ctxsw::ThreadSwitches> after;
    if (opt.server_pid != 0) {
        after = ctxsw::read_tasks(proc);
    }
    phases.advance(kClose);
    for (std::thread& t : threads) {
        t.join();
    }

    Tally total;
    for (Tally& t : tallies) {
        total.rtt_ns.insert(total.rtt_ns.end(), t.rtt_ns.begin(), t.rtt_ns.end());
        total.reset += t.reset;
        total.closed += t.closed;
        total.wrong += t.wrong;
        total.timeouts += t.timeouts;
        total.connect_failed += t.connect_failed;
        total.other += t.other;
    }
    std::sort(total.rtt_ns.begin(), total.rtt_ns.end());
    double sum = 0;
    for (const std::uint64_t ns : total.rtt_ns) {
        sum += static_cast<double>(ns);
    }
    const std::size_t done = total.rtt_ns.size();
    const std::uint64_t expected = opt.clients * opt.pingpongs;
    const std::uint64_t errors = total.wrong + total.timeouts + total.connect_failed +
                                 total.other + not_started;
    std::printf("elapsed %.6f s\n", elapsed.count());
    std::printf("round trips %zu of %llu\n", done, static_cast<unsigned long long>(expected));
    if (done == 0 && total.connect_failed == started) {
        // no time was measured: figures of 0.0 us would read as a very fast server
        std::printf("rtt none: no connection was made (%llu connect failures)\n",
                    static_cast<unsigned long long>(total.connect_failed));
    } else if (done == 0) {
        std::printf("rtt none: no round trip completed\n");
    } else {
        std::printf("rtt avg %.1f us, p50 %.1f us, p99 %.1f us, max %.1f us\n",
                    sum / static_cast<double>(done) / 1000.0, percentile_us(total.rtt_ns, 50),
                    percentile_us(total.rtt_ns, 99),
                    static_cast<double>(total.rtt_ns.back()) / 1000.0);
    }
    std::printf("disconnections %llu (connection reset %llu, closed by server %llu)\n",
                static_cast<unsigned long long>(total.reset + total.closed),
                static_cast<unsigned long long>(total.reset),
                static_cast<unsigned long long>(total.closed));
    std::printf("errors %llu (wrong replies %llu, timeouts %llu, connect failures %llu, "
                "other %llu, threads not started %llu)\n",
                static_cast<unsigned long long>(errors),
                static_cast<unsigned long long>(total.wrong),
                static_cast<unsigned long long>(total.timeouts),
                static_cast<unsigned long long>(total.connect_failed),
                static_cast<unsigned long long>(total.other),
                static_cast<unsigned long long>(not_started));
    if (opt.server_pid != 0) {
        if (before.empty() || after.empty()) {
            std::printf("server context switches: cannot read %s/task (no such process?)\n",
                        proc.c_str());
        } else {
            std::size_t gone = 0;
            const auto rows = ctxsw::deltas(before, after, gone);
            std::printf("server context switches during the run (pid %ld):\n%s", opt.server_pid,
                        ctxsw::format_table(rows).c_str());
            if (gone != 0) {
                std::printf("(%zu server threads exited during the run; not counted)\n", gone);
            }
        }
    }
    return done == expected && errors == 0 && total.reset + total.closed == 0 ? 0 : 1;
}
