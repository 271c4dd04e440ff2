/**
 * @brief Client side of the echo protocol: connect, send and receive with deadlines, one exchange.
 */
#pragma once

#include "echo_protocol.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace dbgkit::targets::client {

/// How an operation ended. kReset is ECONNRESET/EPIPE (the seed's "errno 104" disconnections),
/// kClosed an orderly end of stream where data was expected.
enum class Status { kOk, kTimeout, kClosed, kReset, kError, kBadReply };

inline const char* status_name(Status s) {
    switch (s) {
        case Status::kOk: return "ok";
        case Status::kTimeout: return "timed out";
        case Status::kClosed: return "closed by server";
        case Status::kReset: return "connection reset";
        case Status::kError: return "error";
        case Status::kBadReply: return "wrong reply";
    }
    return "?";
}

namespace detail {

using Clock = std::chrono::steady_clock;

inline int ms_left(Clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left < 0 ? 0 : static_cast<int>(left);
}

/// Waits until FD is ready for EVENTS or the deadline passes.
inline Status wait(int fd, short events, Clock::time_point deadline, int& err) {
    for (;;) {
        pollfd p{fd, events, 0};
        const int n = ::poll(&p, 1, ms_left(deadline));
        if (n > 0) {
            return Status::kOk;
        }
        if (n == 0) {
            return Status::kTimeout;
        }
        if (errno != EINTR) {
            err = errno;
            return Status::kError;
        }
    }
}

inline Status from_errno(int e, int& err) {
    err = e;
    return e == ECONNRESET || e == EPIPE ? Status::kReset : Status::kError;
}

}  // namespace detail

/// A connected non-blocking TCP socket to HOST:PORT with TCP_NODELAY, or -1 with ERR set
/// (ETIMEDOUT when TIMEOUT_MS passed).
inline int connect_tcp(const std::string& host, std::uint16_t port, int timeout_ms, int& err) {
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
        err = EINVAL;
        return -1;
    }
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        err = errno;
        return -1;
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        if (errno != EINPROGRESS) {
            err = errno;
            ::close(fd);
            return -1;
        }
        const auto deadline = detail::Clock::now() + std::chrono::milliseconds(timeout_ms);
        int werr = 0;
        const Status s = detail::wait(fd, POLLOUT, deadline, werr);
        int soerr = 0;
        socklen_t len = sizeof soerr;
        if (s == Status::kTimeout) {
            soerr = ETIMEDOUT;
        } else if (s != Status::kOk) {
            soerr = werr;
        } else {
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len);
        }
        if (soerr != 0) {
            err = soerr;
            ::close(fd);
            return -1;
        }
    }
    return fd;
}

/// Sends all N bytes before DEADLINE (MSG_NOSIGNAL: no SIGPIPE).
inline Status send_all(int fd, const std::uint8_t* data, std::size_t n,
                       detail::Clock::time_point deadline, int& err) {
    while (n != 0) {
        const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
        if (w > 0) {
            data += w;
            n -= static_cast<std::size_t>(w);
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            const Status s = detail::wait(fd, POLLOUT, deadline, err);
            if (s != Status::kOk) {
                return s;
            }
        } else if (w < 0 && errno != EINTR) {
            return detail::from_errno(errno, err);
        }
    }
    return Status::kOk;
}

/// Receives exactly N bytes before DEADLINE.
inline Status recv_exact(int fd, std::uint8_t* data, std::size_t n,
                         detail::Clock::time_point deadline, int& err) {
    while (n != 0) {
        const ssize_t r = ::recv(fd, data, n, 0);
        if (r > 0) {
            data += r;
            n -= static_cast<std::size_t>(r);
        } else if (r == 0) {
            return Status::kClosed;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            const Status s = detail::wait(fd, POLLIN, deadline, err);
            if (s != Status::kOk) {
                return s;
            }
        } else if (errno != EINTR) {
            return detail::from_errno(errno, err);
        }
    }
    return Status::kOk;
}

/// One ping-pong: sends REQUEST (a whole encoded message) and reads one reply into REPLY_PAYLOAD.
/// kBadReply when the reply's header is not a reply of EXPECTED_LENGTH bytes.
inline Status exchange(int fd, const std::vector<std::uint8_t>& request, std::uint32_t expected_length,
                       std::vector<std::uint8_t>& reply_payload, int timeout_ms, int& err) {
    const auto deadline = detail::Clock::now() + std::chrono::milliseconds(timeout_ms);
    Status s = send_all(fd, request.data(), request.size(), deadline, err);
    if (s != Status::kOk) {
        return s;
    }
    std::uint8_t head[echo::kHeaderSize];
    s = recv_exact(fd, head, sizeof head, deadline, err);
    if (s != Status::kOk) {
        return s;
    }
    const echo::Header h = echo::decode_header(head);
    if (h.type != static_cast<std::uint16_t>(echo::Type::kReply) || h.reserved != 0 ||
        h.length != expected_length) {
        return Status::kBadReply;
    }
    reply_payload.resize(h.length);
    return recv_exact(fd, reply_payload.data(), h.length, deadline, err);
}

}  // namespace dbgkit::targets::client
