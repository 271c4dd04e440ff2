// @brief Benchmark: client and server processes ping-pong messages through two shared-memory queues
#include "bench_cli.hpp"
#include "shmemq.h"

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace dbgkit::targets {
namespace {

constexpr const char* kUsage =
    "usage: shmemq_bench [--size D] [--repetitions R] [--lock normal|adaptive|lockfree]\n"
    "                    [--robust on|off] [--capacity C] [--name-prefix /NAME]\n"
    "\n"
    "Forks a server process; the client (this process) enqueues a D-byte message carrying its\n"
    "sequence number on the server's queue and waits for the reply on its own queue, R times; the\n"
    "server waits for each message, checks it and sends it back (the seed's main.c). Prints the\n"
    "data passed, the packets, and real/user/sys time of both processes; the stats build\n"
    "(shmemq_bench_stats) also prints each process's lock counters.\n"
    "\n"
    "  --size D          message size in bytes, 16 to 65536 (default 256, as the seed)\n"
    "  --repetitions R   round trips (default 1000000, as the seed)\n"
    "  --lock K          normal: process-shared mutex (default); adaptive: spins before sleeping;\n"
    "                    lockfree: single-producer/single-consumer atomic indices, no lock\n"
    "  --robust on|off   robust mutexes (default on; off measures glibc's own adaptive\n"
    "                    spin, which robust mutexes do not get; ignored with lockfree)\n"
    "  --capacity C      slots per queue (default 16)\n"
    "  --name-prefix P   queue names P-svr and P-cli (default /dbgkit-shmemq-PID-RANDOM)\n"
    "  --help            this text\n"
    "\n"
    "Exit status: 0 on success, 1 if a message was wrong or a process failed, 2 on a bad\n"
    "argument.\n";

const cli::Program kProgram{"shmemq_bench", kUsage};

struct Options {
    std::uint64_t size = 256;
    std::uint64_t repetitions = 1000000;
    std::uint64_t capacity = 16;
    shmemq_lock_kind lock = SHMEMQ_LOCK_NORMAL;
    bool robust = true;
    std::string prefix;
};

// Shm names are "/" plus at most 254 characters; the suffix "-svr" takes 4.
constexpr std::size_t kPrefixMax = 200;

Options parse(int argc, char** argv) {
    Options opt;
    cli::Args args(kProgram, argc, argv);
    while (args.next()) {
        if (args.is("--size")) {
            opt.size = args.count(16, 65536);
        } else if (args.is("--repetitions")) {
            opt.repetitions = args.count(1, 1000000000);
        } else if (args.is("--capacity")) {
            opt.capacity = args.count(1, 1000000);
        } else if (args.is("--lock")) {
            const std::string v = args.value();
            const int kind = shmemq_lock_kind_from_name(v.c_str());
            if (kind < 0) {
                cli::usage_error(kProgram, "unknown lock kind '" + v + "'");
            }
            opt.lock = static_cast<shmemq_lock_kind>(kind);
        } else if (args.is("--robust")) {
            const std::string v = args.value();
            if (v != "on" && v != "off") {
                cli::usage_error(kProgram, "--robust: not on or off: '" + v + "'");
            }
            opt.robust = v == "on";
        } else if (args.is("--name-prefix")) {
            const std::string v = args.value();
            if (v.size() < 2 || v[0] != '/' || v.find('/', 1) != std::string::npos ||
                v.size() > kPrefixMax) {
                cli::usage_error(kProgram, "--name-prefix: not '/' and 1 to " +
                                               std::to_string(kPrefixMax - 1) +
                                               " characters without '/': '" + v + "'");
            }
            opt.prefix = v;
        } else {
            args.unknown();
        }
    }
    if (opt.prefix.empty()) {
        std::random_device random;
        char buf[64];
        std::snprintf(buf, sizeof buf, "/dbgkit-shmemq-%ld-%08x%08x", static_cast<long>(getpid()),
                      random(), random());
        opt.prefix = buf;
    }
    return opt;
}

// What the signal handler removes: /dev/shm/NAME of both queues (unlink(2) is async-signal-safe,
// shm_unlink is not listed as such), and the child to kill.
char g_paths[2][300];
volatile pid_t g_child = 0;

extern "C" void on_signal(int sig) {
    for (const char* path : g_paths) {
        if (path[0] != '\0') unlink(path);
    }
    if (g_child > 0) kill(g_child, SIGKILL);
    std::signal(sig, SIG_DFL);
    raise(sig);
}

double seconds(const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6; }

void print_time(const char* label, double s) {
    const int minutes = static_cast<int>(s / 60);
    std::printf("%-5s %dm%.3fs\n", label, minutes, s - minutes * 60.0);
}

void print_stats(const char* role) {
    if (!shmemq_stats_enabled()) return;
    shmemq_stats st;
    shmemq_stats_get(&st);
    std::printf("stats %s: acquisitions=%llu contended=%llu spin_acquired=%llu blocking=%llu "
                "slept=%llu owner_died=%llu full=%llu empty=%llu\n",
                role, st.acquisitions, st.contended, st.spin_acquired, st.blocking, st.slept,
                st.owner_died, st.full, st.empty);
    std::printf("spins %s:", role);
    for (int b = 0; b < SHMEMQ_STATS_BUCKETS; ++b) {
        std::printf(" %s=%llu", shmemq_stats_bucket_label(b), st.spin_histogram[b]);
    }
    std::printf("\n");
}

// The message of round trip SEQ: the number at both ends, the rest a fixed pattern.
void stamp(std::vector<unsigned char>& msg, std::uint64_t seq) {
    std::memcpy(msg.data(), &seq, sizeof seq);
    std::memcpy(msg.data() + msg.size() - sizeof seq, &seq, sizeof seq);
}

bool check(const std::vector<unsigned char>& msg, int len, std::uint64_t seq, const char* who) {
    std::uint64_t head = 0;
    std::uint64_t tail = 0;
    std::memcpy(&head, msg.data(), sizeof head);
    std::memcpy(&tail, msg.data() + msg.size() - sizeof tail, sizeof tail);
    // Byte 8 keeps the fill pattern (its index) when the message is long enough not to hold a
    // sequence number there.
    const bool pattern_ok =
        msg.size() < 3 * sizeof seq || msg[sizeof seq] == static_cast<unsigned char>(sizeof seq);
    if (static_cast<std::size_t>(len) != msg.size() || head != seq || tail != seq || !pattern_ok) {
        std::fprintf(stderr, "shmemq_bench: %s: message %llu wrong: %d bytes, numbers %llu/%llu\n",
                     who, static_cast<unsigned long long>(seq), len,
                     static_cast<unsigned long long>(head), static_cast<unsigned long long>(tail));
        return false;
    }
    return true;
}

// Polls TRY until it succeeds, as the seed's `while (!shmemq_try_...)` loops. Every 1024 failures
// it yields the CPU: with a core per process a reply comes long before that, but on oversubscribed
// cores (ctest -j, sanitizers, a busy machine) a pure spin would keep the peer off the CPU for a
// whole time slice per message. Every 2^16 failures it asks PEER_ALIVE and gives up if it says no.
template <typename Try, typename Alive>
bool spin_until(Try&& attempt, Alive&& peer_alive, const char* what) {
    for (std::uint64_t misses = 1;; ++misses) {
        if (attempt()) return true;
        if (errno != EAGAIN) {
            std::fprintf(stderr, "shmemq_bench: %s: %s\n", what, shmemq_last_error());
            return false;
        }
        if ((misses & 0x3ff) == 0) sched_yield();
        if ((misses & 0xffff) == 0 && !peer_alive()) {
            std::fprintf(stderr, "shmemq_bench: %s: the other process is gone\n", what);
            return false;
        }
    }
}

shmemq_t* open_queue(const std::string& name, const Options& opt) {
    shmemq_options o;
    shmemq_options_init(&o);
    o.lock = opt.lock;
    o.robust = opt.robust ? 1 : 0;
    shmemq_t* q = shmemq_open(name.c_str(), opt.capacity, static_cast<unsigned>(opt.size), &o);
    if (q == nullptr) std::fprintf(stderr, "shmemq_bench: %s\n", shmemq_last_error());
    return q;
}

// The server: attaches to both queues by name, echoes every message after checking it.
int serve(const Options& opt, const std::string& svr_name, const std::string& cli_name,
          pid_t parent, int attached_fd) {
    shmemq_stats_reset();
    shmemq_t* inbox = open_queue(svr_name, opt);
    shmemq_t* outbox = inbox != nullptr ? open_queue(cli_name, opt) : nullptr;
    int status = inbox != nullptr && outbox != nullptr ? 0 : 1;
    const char byte = status == 0 ? 'a' : 'e';
    (void)!write(attached_fd, &byte, 1);
    close(attached_fd);
    std::vector<unsigned char> msg(opt.size);
    const auto parent_alive = [parent] { return getppid() == parent; };
    for (std::uint64_t i = 0; status == 0 && i < opt.repetitions; ++i) {
        int len = 0;
        const auto receive = [&] {
            return shmemq_try_dequeue_len(inbox, msg.data(), static_cast<int>(msg.size()), &len);
        };
        if (!spin_until(receive, parent_alive, "server dequeue") ||
            !check(msg, len, i, "server") ||
            !spin_until([&] { return shmemq_try_enqueue(outbox, msg.data(), len); }, parent_alive,
                        "server enqueue")) {
            status = 1;
        }
    }
    print_stats("server");
    std::fflush(stdout);
    shmemq_destroy(inbox, 0);
    shmemq_destroy(outbox, 0);
    return status;
}

int run(const Options& opt) {
    const std::string svr_name = opt.prefix + "-svr";
    const std::string cli_name = opt.prefix + "-cli";
    std::snprintf(g_paths[0], sizeof g_paths[0], "/dev/shm%s", svr_name.c_str());
    std::snprintf(g_paths[1], sizeof g_paths[1], "/dev/shm%s", cli_name.c_str());
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::signal(SIGHUP, on_signal);

    shmemq_t* svr = open_queue(svr_name, opt);
    shmemq_t* cli = svr != nullptr ? open_queue(cli_name, opt) : nullptr;
    if (cli == nullptr) {
        shmemq_destroy(svr, 1);
        return 1;
    }
    std::printf("shmemq_bench: lock %s%s, %llu B messages, %llu repetitions, capacity %llu\n",
                shmemq_lock_kind_name(opt.lock),
                opt.lock == SHMEMQ_LOCK_LOCKFREE ? "" : opt.robust ? " (robust)" : " (not robust)",
                static_cast<unsigned long long>(opt.size),
                static_cast<unsigned long long>(opt.repetitions),
                static_cast<unsigned long long>(opt.capacity));
    std::fflush(stdout);

    // The server says over this pipe when it has attached to both queues; then the names go
    // (the mappings stay), so that not even a SIGKILL of either process leaves /dev/shm files.
    int attached[2];
    if (pipe(attached) != 0) {
        std::perror("shmemq_bench: pipe");
        shmemq_destroy(svr, 1);
        shmemq_destroy(cli, 1);
        return 1;
    }
    timespec start{};
    clock_gettime(CLOCK_MONOTONIC, &start);
    const pid_t parent = getpid();
    const pid_t child = fork();
    if (child < 0) {
        std::perror("shmemq_bench: fork");
        shmemq_destroy(svr, 1);
        shmemq_destroy(cli, 1);
        return 1;
    }
    if (child == 0) {
        std::signal(SIGINT, SIG_DFL);
        std::signal(SIGTERM, SIG_DFL);
        std::signal(SIGHUP, SIG_DFL);
        close(attached[0]);
        // The inherited handles stay mapped but unused: the server opens the queues itself.
        std::_Exit(serve(opt, svr_name, cli_name, parent, attached[1]));
    }
    g_child = child;
    close(attached[1]);
    char byte = 0;
    ssize_t got = 0;
    do {
        got = read(attached[0], &byte, 1);
    } while (got < 0 && errno == EINTR);
    close(attached[0]);
    shm_unlink(svr_name.c_str());
    shm_unlink(cli_name.c_str());
    g_paths[0][0] = g_paths[1][0] = '\0';

    int status = got == 1 && byte == 'a' ? 0 : 1;  // EOF: the server died before attaching
    int child_status = 0;
    bool reaped = false;
    const auto child_alive = [&] {
        if (waitpid(child, &child_status, WNOHANG) == child) reaped = true;
        return !reaped;
    };
    std::vector<unsigned char> msg(opt.size);
    for (std::size_t j = 0; j < msg.size(); ++j) msg[j] = static_cast<unsigned char>(j);
    std::vector<unsigned char> reply(opt.size);
    for (std::uint64_t i = 0; status == 0 && i < opt.repetitions; ++i) {
        stamp(msg, i);
        int len = 0;
        const auto send = [&] {
            return shmemq_try_enqueue(svr, msg.data(), static_cast<int>(msg.size()));
        };
        const auto receive = [&] {
            return shmemq_try_dequeue_len(cli, reply.data(), static_cast<int>(reply.size()), &len);
        };
        if (!spin_until(send, child_alive, "client enqueue") ||
            !spin_until(receive, child_alive, "client dequeue") ||
            !check(reply, len, i, "client")) {
            status = 1;
        }
    }
    if (status != 0 && !reaped) kill(child, SIGKILL);
    if (!reaped && waitpid(child, &child_status, 0) != child) child_status = 1;
    g_child = 0;
    if (!WIFEXITED(child_status) || WEXITSTATUS(child_status) != 0) status = 1;
    timespec end{};
    clock_gettime(CLOCK_MONOTONIC, &end);

    if (status == 0) {
        rusage self{};
        rusage children{};
        getrusage(RUSAGE_SELF, &self);
        getrusage(RUSAGE_CHILDREN, &children);
        const double packets = 2.0 * static_cast<double>(opt.repetitions);
        std::printf("total data passed between client and server: %.2f MB, %.2f million packets\n",
                    packets * static_cast<double>(opt.size) / (1024.0 * 1024.0), packets / 1e6);
        print_time("real", static_cast<double>(end.tv_sec - start.tv_sec) +
                               static_cast<double>(end.tv_nsec - start.tv_nsec) / 1e9);
        print_time("user", seconds(self.ru_utime) + seconds(children.ru_utime));
        print_time("sys", seconds(self.ru_stime) + seconds(children.ru_stime));
        print_stats("client");
    } else {
        std::fprintf(stderr, "shmemq_bench: failed\n");
    }
    shmemq_destroy(svr, 0);  // already unlinked
    shmemq_destroy(cli, 0);
    return status;
}

}  // namespace
}  // namespace dbgkit::targets

int main(int argc, char** argv) {
    return dbgkit::targets::run(dbgkit::targets::parse(argc, argv));
}
