/**
 * @brief TCP echo servers: the TCPServer base, thread-per-client, and epoll reactors (LT and ET).
 */
#pragma once

#include "context_switches.hpp"
#include "echo_protocol.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dbgkit::targets {

/// Receives one log line (no newline). The default writes "tcp_echo_server: LINE\n" on stderr.
using Logger = std::function<void(const std::string&)>;

/// What every server is built from.
struct ServerOptions {
    std::string bind = "127.0.0.1";  ///< IPv4 address to listen on
    std::uint16_t port = 0;          ///< 0: any free port (see TCPServer::port())
    std::uint32_t max_payload = echo::kDefaultMaxPayload;
    Logger log;  ///< empty: stderr
    /// A bug to hunt with leak checkers (docs/memdump.md, "Hunting a leak in a running server"):
    /// each connection replaces the server's greeting buffer of this many bytes without freeing
    /// the previous one. 0 (default): no such buffer.
    std::uint32_t leak_per_peer = 0;
};

/// Counters of a server's life so far.
struct ServerStats {
    std::uint64_t accepted = 0;  ///< connections accepted
    std::uint64_t closed = 0;    ///< peers that left between messages
    std::uint64_t dropped = 0;   ///< peers dropped with a log line (bad header, mid-message, error)
    std::uint64_t refused = 0;   ///< connections closed at once for lack of fds or threads
    std::uint64_t at_shutdown = 0;  ///< peers still connected when stop() closed them
    std::uint64_t messages = 0;  ///< requests answered
};

namespace detail {

/// Writes "tcp_echo_server: LINE\n" with one write(2), so lines of several threads never mix.
inline void stderr_log(const std::string& line) {
    const std::string text = "tcp_echo_server: " + line + "\n";
    const ssize_t ignored = ::write(STDERR_FILENO, text.data(), text.size());
    static_cast<void>(ignored);
}

/// Names the calling thread (at most 15 characters, pthread_setname_np(3)).
inline void name_thread(const std::string& name) {
    pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
}

inline std::string errno_text(const char* what, int err) {
    return std::string(what) + ": " + std::strerror(err);
}

/// "127.0.0.1:54321"
inline std::string format_address(const sockaddr_in& a) {
    char host[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &a.sin_addr, host, sizeof host);
    return std::string(host) + ":" + std::to_string(ntohs(a.sin_port));
}

enum class Io { kDone, kAgain, kClosed, kError };

/// One recv(2) into SESSION; kClosed on end of stream, kError with ERR set.
inline Io read_once(int fd, echo::Session& session, std::string& why) {
    std::size_t room = 0;
    std::uint8_t* space = session.read_space(room);
    const ssize_t n = ::recv(fd, space, room, 0);
    if (n > 0) {
        if (auto bad = session.commit(static_cast<std::size_t>(n))) {
            why = *bad;
            return Io::kError;
        }
        return Io::kDone;
    }
    if (n == 0) {
        return Io::kClosed;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
        return Io::kAgain;
    }
    why = errno_text("recv", errno);
    return Io::kError;
}

/// Writes pending replies until none are left (kDone) or the socket is full (kAgain).
/// MSG_NOSIGNAL: a peer that has gone gives EPIPE here, not SIGPIPE.
inline Io flush(int fd, echo::Session& session, std::string& why) {
    while (session.pending_size() != 0) {
        const ssize_t n = ::send(fd, session.pending(), session.pending_size(), MSG_NOSIGNAL);
        if (n > 0) {
            session.consumed(static_cast<std::size_t>(n));
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return Io::kAgain;
        } else {
            why = errno_text("send", errno);
            return Io::kError;
        }
    }
    return Io::kDone;
}

}  // namespace detail

/**
 * The listening socket and the bookkeeping of connected peers, shared by every server kind.
 * The constructor binds and listens (throws std::system_error naming the call that failed);
 * start() launches the server's threads; stop() wakes them through an eventfd, joins them all and
 * closes every connection. Peer bookkeeping and the records of exited threads sit behind one
 * mutex; nothing else is shared between threads.
 */
class TCPServer {
public:
    explicit TCPServer(ServerOptions options) : options_(std::move(options)) {
        if (!options_.log) {
            options_.log = detail::stderr_log;
        }
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(options_.port);
        if (inet_pton(AF_INET, options_.bind.c_str(), &addr.sin_addr) != 1) {
            throw std::invalid_argument("not an IPv4 address: '" + options_.bind + "'");
        }
        stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (stop_fd_ < 0 || listen_fd_ < 0) {
            const int err = errno;
            close_fds();
            throw std::system_error(err, std::generic_category(), "socket");
        }
        const int one = 1;
        setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
            ::listen(listen_fd_, SOMAXCONN) != 0) {
            const int err = errno;
            close_fds();
            throw std::system_error(err, std::generic_category(),
                                    "cannot listen on " + detail::format_address(addr));
        }
        sockaddr_in bound{};
        socklen_t len = sizeof bound;
        getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
        port_ = ntohs(bound.sin_port);
    }

    TCPServer(const TCPServer&) = delete;
    TCPServer& operator=(const TCPServer&) = delete;
    /// Derived classes call stop() in their own destructor: their threads use their members.
    virtual ~TCPServer() { close_fds(); }

    /// "threads", "epoll" or "epoll-et".
    virtual const char* mode() const = 0;

    /// Launches the server's threads; call once.
    void start() {
        launch();
        started_ = true;
    }

    /// Wakes every server thread, joins them and closes all connections. Idempotent.
    void stop() {
        if (!started_ || stopped_) {
            return;
        }
        stopped_ = true;
        const std::uint64_t one = 1;
        const ssize_t ignored = ::write(stop_fd_, &one, sizeof one);
        static_cast<void>(ignored);
        join_threads();
    }

    std::uint16_t port() const { return port_; }
    const std::string& bind_address() const { return options_.bind; }

    /// Peers connected now.
    std::size_t peer_count() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return peers_.size();
    }

    ServerStats stats() const {
        ServerStats s;
        s.accepted = accepted_.load();
        s.closed = closed_.load();
        s.dropped = dropped_.load();
        s.refused = refused_.load();
        s.at_shutdown = at_shutdown_.load();
        s.messages = messages_.load();
        return s;
    }

    /// Every live thread of this process (from /proc/self/task) plus the server threads that have
    /// exited (counts captured as they ended), sorted by tid; a thread that recorded its exit but
    /// has not quite gone yet is listed once, as exited.
    std::vector<ctxsw::ThreadSwitches> context_switches() const {
        std::vector<ctxsw::ThreadSwitches> rows;
        std::set<long> exited_tids;
        std::vector<ctxsw::ThreadSwitches> exited;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            exited = exited_;
        }
        for (const auto& row : exited) {
            exited_tids.insert(row.tid);
        }
        for (auto& row : ctxsw::read_tasks("/proc/self")) {
            if (exited_tids.count(row.tid) == 0) {
                rows.push_back(std::move(row));
            }
        }
        rows.insert(rows.end(), exited.begin(), exited.end());
        std::sort(rows.begin(), rows.end(),
                  [](const ctxsw::ThreadSwitches& a, const ctxsw::ThreadSwitches& b) {
                      return a.tid < b.tid;
                  });
        return rows;
    }

protected:
    virtual void launch() = 0;
    virtual void join_threads() = 0;

    /// Registers a new connection; returns its peer id (1, 2, ...).
    std::uint64_t add_peer(int fd, const sockaddr_in& addr) {
        std::lock_guard<std::mutex> lock(mutex_);
        const std::uint64_t id = ++last_peer_id_;
        peers_.emplace(id, Peer{fd, detail::format_address(addr)});
        accepted_.fetch_add(1);
        if (options_.leak_per_peer > 0) {  // the bug: the previous greeting is never freed
            greeting_ = static_cast<char*>(std::malloc(options_.leak_per_peer));
            if (greeting_ != nullptr) {
                std::memset(greeting_, 'g', options_.leak_per_peer);
            }
        }
        return id;
    }

    /// Unregisters peer ID and closes its socket.
    void remove_peer(std::uint64_t id) {
        int fd = -1;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            const auto it = peers_.find(id);
            if (it == peers_.end()) {
                return;
            }
            fd = it->second.fd;
            peers_.erase(it);
        }
        ::close(fd);
    }

    /// Closes peer ID because the server stops: no log line.
    void peer_shutdown(std::uint64_t id) {
        at_shutdown_.fetch_add(1);
        remove_peer(id);
    }

    /// Peer ID left between messages: no log line.
    void peer_closed(std::uint64_t id) {
        closed_.fetch_add(1);
        remove_peer(id);
    }

    /// Drops peer ID with one log line: "peer ID (ADDRESS) dropped: WHY".
    void drop_peer(std::uint64_t id, const std::string& why) {
        std::string address;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            const auto it = peers_.find(id);
            if (it != peers_.end()) {
                address = it->second.address;
            }
        }
        options_.log("peer " + std::to_string(id) + " (" + address + ") dropped: " + why);
        dropped_.fetch_add(1);
        remove_peer(id);
    }

    /// A peer's end of stream: clean between messages, logged mid-message.
    void peer_eof(std::uint64_t id, const echo::Session& session) {
        if (session.partial() == 0) {
            peer_closed(id);
        } else {
            drop_peer(id, "closed mid-message (" + session.describe_partial() + ")");
        }
    }

    /// Accepts one connection (non-blocking, close-on-exec). Returns -1 when there is none (EAGAIN)
    /// or on a transient error. Out of fds (EMFILE/ENFILE), it frees its spare fd, accepts and
    /// closes the connection at once (the peer sees a reset rather than waiting forever), logs it
    /// and takes the spare back: without that, a level-triggered loop would spin on the listener.
    int accept_one(sockaddr_in& addr) {
        for (;;) {
            socklen_t len = sizeof addr;
            const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len,
                                     SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd >= 0) {
                const int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                return fd;
            }
            if (errno == EINTR || errno == ECONNABORTED) {
                continue;
            }
            if ((errno == EMFILE || errno == ENFILE) && spare_fd_ >= 0) {
                const int err = errno;
                ::close(spare_fd_);
                const int victim = ::accept(listen_fd_, nullptr, nullptr);
                if (victim >= 0) {
                    ::close(victim);
                    refused_.fetch_add(1);
                    rlimit lim{};
                    getrlimit(RLIMIT_NOFILE, &lim);
                    options_.log(detail::errno_text("accept", err) + " (RLIMIT_NOFILE " +
                                 std::to_string(lim.rlim_cur) + "): refused a connection");
                }
                spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
                if (victim < 0) {
                    return -1;  // nothing was pending: accept(2) reports EMFILE before EAGAIN
                }
                continue;
            }
            return -1;
        }
    }

    /// Records the calling thread's context switches as it is about to end.
    void record_thread_exit() {
        ctxsw::ThreadSwitches row = ctxsw::capture_current_thread();
        std::lock_guard<std::mutex> lock(mutex_);
        exited_.push_back(std::move(row));
    }

    void count_messages(std::uint64_t n) { messages_.fetch_add(n); }
    void count_refused() { refused_.fetch_add(1); }
    void log(const std::string& line) { options_.log(line); }

    ServerOptions options_;
    int listen_fd_ = -1;
    int stop_fd_ = -1;  ///< eventfd: readable (for good) once stop() has been called
    mutable std::mutex mutex_;

private:
    struct Peer {
        int fd;
        std::string address;
    };

    void close_fds() {
        for (int* fd : {&listen_fd_, &stop_fd_, &spare_fd_}) {
            if (*fd >= 0) {
                ::close(*fd);
                *fd = -1;
            }
        }
    }

    int spare_fd_ = -1;
    std::uint16_t port_ = 0;
    bool started_ = false;
    bool stopped_ = false;
    std::uint64_t last_peer_id_ = 0;                // guarded by mutex_
    char* greeting_ = nullptr;                      // guarded by mutex_ (leak_per_peer)
    std::map<std::uint64_t, Peer> peers_;           // guarded by mutex_
    std::vector<ctxsw::ThreadSwitches> exited_;     // guarded by mutex_
    std::atomic<std::uint64_t> accepted_{0}, closed_{0}, dropped_{0}, refused_{0}, messages_{0},
        at_shutdown_{0};
};

/**
 * The classic server: an accept thread ("tpc-accept") and one thread per connection
 * ("tpc-client-N", N the peer id mod 10000 to fit 15 characters), each doing blocking-style I/O
 * (poll on its socket and the stop eventfd). A client thread that ends asks the accept thread,
 * through a second eventfd, to join it.
 */
class ThreadPerClientServer final : public TCPServer {
public:
    explicit ThreadPerClientServer(ServerOptions options) : TCPServer(std::move(options)) {
        reap_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (reap_fd_ < 0) {
            throw std::system_error(errno, std::generic_category(), "eventfd");
        }
    }
    ~ThreadPerClientServer() override {
        stop();
        ::close(reap_fd_);
    }
    const char* mode() const override { return "threads"; }

private:
    void launch() override { accept_thread_ = std::thread([this] { accept_loop(); }); }
    void join_threads() override { accept_thread_.join(); }

    void accept_loop() {
        detail::name_thread("tpc-accept");
        pollfd fds[3] = {{listen_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}, {reap_fd_, POLLIN, 0}};
        for (;;) {
            if (::poll(fds, 3, -1) < 0) {
                if (errno == EINTR) {
                    continue;
                }
                log(detail::errno_text("poll", errno));
                break;
            }
            if (fds[1].revents != 0) {
                break;
            }
            if (fds[2].revents != 0) {
                reap();
            }
            if (fds[0].revents != 0) {
                sockaddr_in addr{};
                const int fd = accept_one(addr);
                if (fd >= 0) {
                    spawn(fd, addr);
                }
            }
        }
        // stop_fd_ is readable for good: every client thread is on its way out.
        for (auto& [id, thread] : clients_) {
            thread.join();
        }
        clients_.clear();
        record_thread_exit();
    }

    void spawn(int fd, const sockaddr_in& addr) {
        const std::uint64_t id = add_peer(fd, addr);
        try {
            clients_.emplace(id, std::thread([this, id, fd] { client_loop(id, fd); }));
        } catch (const std::system_error& e) {
            log("peer " + std::to_string(id) + " refused: cannot start a thread: " + e.what());
            count_refused();
            remove_peer(id);
        }
    }

    /// Joins the client threads that said they are done.
    void reap() {
        std::uint64_t count = 0;
        const ssize_t ignored = ::read(reap_fd_, &count, sizeof count);
        static_cast<void>(ignored);
        std::vector<std::uint64_t> done;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            done.swap(finished_);
        }
        for (const std::uint64_t id : done) {
            const auto it = clients_.find(id);
            if (it != clients_.end()) {
                it->second.join();
                clients_.erase(it);
            }
        }
    }

    void client_loop(std::uint64_t id, int fd) {
        detail::name_thread("tpc-client-" + std::to_string(id % 10000));
        echo::Session session(options_.max_payload);
        std::string why;
        pollfd fds[2] = {{fd, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
        bool open = true;
        while (open) {
            fds[0].events = session.pending_size() != 0 ? POLLOUT : POLLIN;
            if (::poll(fds, 2, -1) < 0) {
                if (errno == EINTR) {
                    continue;
                }
                drop_peer(id, detail::errno_text("poll", errno));
                break;
            }
            if (fds[1].revents != 0) {
                peer_shutdown(id);
                break;
            }
            if (fds[0].revents == 0) {
                continue;
            }
            if (session.pending_size() == 0) {
                const std::uint64_t before = session.messages();
                switch (detail::read_once(fd, session, why)) {
                    case detail::Io::kClosed:
                        peer_eof(id, session);
                        open = false;
                        continue;
                    case detail::Io::kError:
                        drop_peer(id, why);
                        open = false;
                        continue;
                    default:
                        break;
                }
                count_messages(session.messages() - before);
            }
            if (detail::flush(fd, session, why) == detail::Io::kError) {
                drop_peer(id, why);
                open = false;
            }
        }
        record_thread_exit();
        {
            std::lock_guard<std::mutex> lock(mutex_);
            finished_.push_back(id);
        }
        const std::uint64_t one = 1;
        const ssize_t ignored = ::write(reap_fd_, &one, sizeof one);
        static_cast<void>(ignored);
    }

    int reap_fd_ = -1;
    std::thread accept_thread_;
    std::map<std::uint64_t, std::thread> clients_;  // the accept thread's only
    std::vector<std::uint64_t> finished_;          // guarded by mutex_
};

/**
 * The reactor: one thread ("reactor") waits on epoll for the listener, the stop eventfd and every
 * connection. Level-triggered (the seed's choice): one accept or one recv per readiness event, and
 * EPOLLOUT asked for only while replies are pending. Edge-triggered: each connection is registered
 * once for EPOLLIN | EPOLLOUT | EPOLLET and every event drains the socket until EAGAIN (accepts
 * too), since no further event comes for data already signalled. Both stop reading a peer whose
 * unsent replies exceed kHighWater until they drain.
 */
class ReactorServer final : public TCPServer {
public:
    static constexpr std::size_t kHighWater = 4u << 20;

    ReactorServer(ServerOptions options, bool edge_triggered)
        : TCPServer(std::move(options)), edge_(edge_triggered) {
        epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
        if (epoll_fd_ < 0) {
            throw std::system_error(errno, std::generic_category(), "epoll_create1");
        }
        try {
            add(listen_fd_, edge_ ? EPOLLIN | EPOLLET : EPOLLIN);
            add(stop_fd_, EPOLLIN);
        } catch (...) {
            ::close(epoll_fd_);
            throw;
        }
    }
    ~ReactorServer() override {
        stop();
        ::close(epoll_fd_);
    }
    const char* mode() const override { return edge_ ? "epoll-et" : "epoll"; }

private:
    struct Conn {
        Conn(std::uint64_t id_, int fd_, std::uint32_t max_payload)
            : id(id_), fd(fd_), session(max_payload) {}
        std::uint64_t id;
        int fd;
        echo::Session session;
        std::uint32_t events = 0;  // registered interest (level-triggered only)
    };

    void launch() override { thread_ = std::thread([this] { loop(); }); }
    void join_threads() override { thread_.join(); }

    void add(int fd, std::uint32_t events) {
        epoll_event ev{};
        ev.events = events;
        ev.data.fd = fd;
        if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
            throw std::system_error(errno, std::generic_category(), "epoll_ctl");
        }
    }

    void loop() {
        detail::name_thread("reactor");
        std::vector<epoll_event> events(256);
        bool running = true;
        while (running) {
            const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), -1);
            if (n < 0) {
                if (errno == EINTR) {
                    continue;
                }
                log(detail::errno_text("epoll_wait", errno));
                break;
            }
            for (int i = 0; i < n; ++i) {
                const int fd = events[i].data.fd;
                if (fd == stop_fd_) {
                    running = false;
                } else if (fd == listen_fd_) {
                    accept_ready();
                } else {
                    const auto it = conns_.find(fd);
                    if (it != conns_.end()) {
                        serve(*it->second);
                    }
                }
            }
        }
        for (auto& [fd, conn] : conns_) {
            peer_shutdown(conn->id);
        }
        conns_.clear();
        record_thread_exit();
    }

    void accept_ready() {
        do {
            sockaddr_in addr{};
            const int fd = accept_one(addr);
            if (fd < 0) {
                return;
            }
            const std::uint64_t id = add_peer(fd, addr);
            auto conn = std::make_unique<Conn>(id, fd, options_.max_payload);
            conn->events = edge_ ? EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET : EPOLLIN;
            epoll_event ev{};
            ev.events = conn->events;
            ev.data.fd = fd;
            if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
                drop_peer(id, detail::errno_text("epoll_ctl", errno));
                continue;
            }
            conns_.emplace(fd, std::move(conn));
        } while (edge_);
    }

    /// Handles a readiness event of CONN; closes it when it is done.
    void serve(Conn& conn) {
        std::string why;
        bool alive = true;
        // Requests are counted before their replies go out, so a client that has its reply sees
        // it counted.
        auto read = [&] {
            const std::uint64_t before = conn.session.messages();
            const detail::Io in = detail::read_once(conn.fd, conn.session, why);
            count_messages(conn.session.messages() - before);
            return in;
        };
        if (edge_) {
            for (;;) {
                const detail::Io out = detail::flush(conn.fd, conn.session, why);
                if (out == detail::Io::kError) {
                    alive = false;
                    break;
                }
                if (conn.session.pending_size() >= kHighWater) {
                    break;  // resume on the EPOLLOUT edge
                }
                const detail::Io in = read();
                if (in == detail::Io::kAgain) {
                    if (detail::flush(conn.fd, conn.session, why) == detail::Io::kError) {
                        alive = false;
                    }
                    break;
                }
                if (in != detail::Io::kDone) {
                    alive = false;
                    break;
                }
            }
        } else {
            if (conn.session.pending_size() < kHighWater) {
                const detail::Io in = read();
                alive = in == detail::Io::kDone || in == detail::Io::kAgain;
            }
            if (alive && detail::flush(conn.fd, conn.session, why) == detail::Io::kError) {
                alive = false;
            }
        }
        if (!alive) {
            close_conn(conn, why);
            return;
        }
        if (!edge_) {
            std::uint32_t want = 0;
            if (conn.session.pending_size() < kHighWater) {
                want |= EPOLLIN;
            }
            if (conn.session.pending_size() != 0) {
                want |= EPOLLOUT;
            }
            if (want != conn.events) {
                epoll_event ev{};
                ev.events = want;
                ev.data.fd = conn.fd;
                epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, conn.fd, &ev);
                conn.events = want;
            }
        }
    }

    /// WHY empty: end of stream (clean or mid-message); otherwise an error or a bad header.
    void close_conn(Conn& conn, const std::string& why) {
        const int fd = conn.fd;
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
        if (why.empty()) {
            peer_eof(conn.id, conn.session);
        } else {
            drop_peer(conn.id, why);
        }
        conns_.erase(fd);  // destroys CONN
    }

    bool edge_;
    int epoll_fd_ = -1;
    std::thread thread_;
    std::unordered_map<int, std::unique_ptr<Conn>> conns_;  // the reactor thread's only
};

/// A server of MODE ("threads", "epoll", "epoll-et"); nullptr for an unknown mode.
inline std::unique_ptr<TCPServer> make_server(const std::string& mode, ServerOptions options) {
    if (mode == "threads") {
        return std::make_unique<ThreadPerClientServer>(std::move(options));
    }
    if (mode == "epoll" || mode == "epoll-et") {
        return std::make_unique<ReactorServer>(std::move(options), mode == "epoll-et");
    }
    return nullptr;
}

/// Raises the soft RLIMIT_NOFILE to the hard limit (where allowed); returns the soft limit now.
inline std::uint64_t raise_fd_limit() {
    rlimit lim{};
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0) {
        return 0;
    }
    if (lim.rlim_cur < lim.rlim_max) {
        rlimit want = lim;
        want.rlim_cur = lim.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &want) == 0) {
            lim = want;
        }
    }
    return lim.rlim_cur;
}

}  // namespace dbgkit::targets
