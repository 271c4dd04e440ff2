// @brief tcp_echo_server: runs one echo server (threads, epoll, epoll-et) until SIGINT or SIGTERM.
#include "bench_cli.hpp"
#include "tcp_servers.hpp"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

namespace {

constexpr const char* kUsage =
    "usage: tcp_echo_server [--mode threads|epoll|epoll-et] [--bind ADDR] [--port N]\n"
    "                       [--max-payload BYTES] [--leak-per-peer BYTES]\n"
    "\n"
    "Echoes every request of the protocol in docs/tcp-echo-protocol.md until SIGINT or SIGTERM.\n"
    "The first line on stdout is `listening on ADDR:PORT pid PID`. SIGUSR1 prints the context\n"
    "switches of every thread (from /proc/self/task/*/status); shutdown prints them again, with\n"
    "the threads that have exited, and exits 0.\n"
    "\n"
    "  --mode M            threads: an accept thread and one thread per client; epoll (default):\n"
    "                      one reactor thread, level-triggered epoll; epoll-et: edge-triggered\n"
    "  --bind ADDR         IPv4 address to listen on (default 127.0.0.1)\n"
    "  --port N            TCP port, 0 for any free port (default 0)\n"
    "  --max-payload BYTES largest payload accepted; a longer request drops the peer\n"
    "                      (default 1048576, at most 67108864)\n"
    "  --leak-per-peer BYTES a bug to hunt with leak checkers: each connection leaks the\n"
    "                      previous connection's BYTES-byte greeting buffer (default 0: none)\n"
    "  --help              this text\n"
    "\n"
    "Exit status: 0 after a clean shutdown, 1 when the server cannot start, 2 on a bad argument.\n";

const dbgkit::targets::cli::Program kProgram{"tcp_echo_server", kUsage};

struct Options {
    std::string mode = "epoll";
    dbgkit::targets::ServerOptions server;
};

Options parse(int argc, char** argv) {
    Options opt;
    dbgkit::targets::cli::Args args(kProgram, argc, argv);
    while (args.next()) {
        if (args.is("--mode")) {
            opt.mode = args.value();
        } else if (args.is("--bind")) {
            opt.server.bind = args.value();
        } else if (args.is("--port")) {
            opt.server.port = static_cast<std::uint16_t>(args.count(0, 65535));
        } else if (args.is("--leak-per-peer")) {
            opt.server.leak_per_peer = static_cast<std::uint32_t>(args.count(0, 1 << 20));
        } else if (args.is("--max-payload")) {
            opt.server.max_payload =
                static_cast<std::uint32_t>(args.count(0, dbgkit::targets::echo::kMaxMaxPayload));
        } else {
            args.unknown();
        }
    }
    if (opt.mode != "threads" && opt.mode != "epoll" && opt.mode != "epoll-et") {
        dbgkit::targets::cli::usage_error(kProgram, "unknown mode '" + opt.mode + "'");
    }
    in_addr probe{};
    if (inet_pton(AF_INET, opt.server.bind.c_str(), &probe) != 1) {
        dbgkit::targets::cli::usage_error(kProgram,
                                          "--bind: not an IPv4 address: '" + opt.server.bind + "'");
    }
    return opt;
}

void print_switches(const dbgkit::targets::TCPServer& server, const char* when) {
    const std::string table = dbgkit::targets::ctxsw::format_table(server.context_switches());
    std::printf("context switches (%s, pid %ld, mode %s):\n%s", when, static_cast<long>(getpid()),
                server.mode(), table.c_str());
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    const Options opt = parse(argc, argv);

    // Blocked before any thread starts, so every thread inherits the mask and the signals are
    // only ever read from the signalfd: no code runs in a signal handler.
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    const int sfd = signalfd(-1, &signals, SFD_CLOEXEC);
    if (sfd < 0) {
        std::fprintf(stderr, "tcp_echo_server: signalfd: %s\n", std::strerror(errno));
        return 1;
    }

    const std::uint64_t fd_limit = dbgkit::targets::raise_fd_limit();
    std::unique_ptr<dbgkit::targets::TCPServer> server;
    try {
        server = dbgkit::targets::make_server(opt.mode, opt.server);
        server->start();
    } catch (const std::exception& e) {
        std::fprintf(stderr, "tcp_echo_server: %s\n", e.what());
        close(sfd);
        return 1;
    }
    std::printf("listening on %s:%u pid %ld\n", server->bind_address().c_str(),
                unsigned{server->port()}, static_cast<long>(getpid()));
    std::printf("mode %s, max payload %lu bytes, fd limit %llu\n", server->mode(),
                static_cast<unsigned long>(opt.server.max_payload),
                static_cast<unsigned long long>(fd_limit));
    std::fflush(stdout);

    for (;;) {
        signalfd_siginfo info{};
        const ssize_t n = read(sfd, &info, sizeof info);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n != static_cast<ssize_t>(sizeof info)) {
            std::fprintf(stderr, "tcp_echo_server: signalfd read: %s\n", std::strerror(errno));
            break;
        }
        if (info.ssi_signo == SIGUSR1) {
            print_switches(*server, "SIGUSR1");
            continue;
        }
        std::printf("shutting down on %s\n", info.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM");
        break;
    }
    server->stop();
    const dbgkit::targets::ServerStats s = server->stats();
    std::printf("peers accepted %llu, closed %llu, dropped %llu, refused %llu, open at shutdown "
                "%llu; requests %llu\n",
                static_cast<unsigned long long>(s.accepted),
                static_cast<unsigned long long>(s.closed),
                static_cast<unsigned long long>(s.dropped),
                static_cast<unsigned long long>(s.refused),
                static_cast<unsigned long long>(s.at_shutdown),
                static_cast<unsigned long long>(s.messages));
    print_switches(*server, "shutdown");
    server.reset();
    close(sfd);
    return 0;
}
