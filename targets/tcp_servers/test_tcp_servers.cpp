// @brief TCP echo server tests: codec and spec example, /proc parser, each server kind under load.
#include "context_switches.hpp"
#include "echo_client.hpp"
#include "echo_protocol.hpp"
#include "tcp_servers.hpp"

#include <gtest/gtest.h>

#include <sys/syscall.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace echo = dbgkit::targets::echo;
namespace client = dbgkit::targets::client;
namespace ctxsw = dbgkit::targets::ctxsw;
using dbgkit::targets::ServerOptions;
using dbgkit::targets::TCPServer;
using Bytes = std::vector<std::uint8_t>;
using Clock = std::chrono::steady_clock;

constexpr int kTimeoutMs = 4000;  // every socket wait in these tests

// -- protocol --------------------------------------------------------------------------------------

/// The hex bytes between `<!-- example:NAME -->` and `<!-- example:NAME:end -->` in the spec.
Bytes spec_example(const std::string& name) {
    std::ifstream in(DBGKIT_TCP_PROTOCOL_MD);
    EXPECT_TRUE(in) << "cannot read " << DBGKIT_TCP_PROTOCOL_MD;
    std::stringstream text;
    text << in.rdbuf();
    const std::string md = text.str();
    const std::string start = "<!-- example:" + name + " -->";
    const std::string end = "<!-- example:" + name + ":end -->";
    const std::size_t a = md.find(start);
    const std::size_t b = md.find(end);
    EXPECT_NE(a, std::string::npos) << start;
    EXPECT_NE(b, std::string::npos) << end;
    if (a == std::string::npos || b == std::string::npos || b < a) {
        return {};
    }
    std::istringstream block(md.substr(a + start.size(), b - a - start.size()));
    Bytes bytes;
    std::string word;
    while (block >> word) {
        if (word.rfind("```", 0) == 0) {
            continue;  // the code fence
        }
        EXPECT_EQ(word.size(), 2u) << "not a hex byte: " << word;
        bytes.push_back(static_cast<std::uint8_t>(std::stoul(word, nullptr, 16)));
    }
    return bytes;
}

Bytes request(const std::string& payload) {
    Bytes out;
    echo::encode(out, echo::Type::kRequest, reinterpret_cast<const std::uint8_t*>(payload.data()),
                 static_cast<std::uint32_t>(payload.size()));
    return out;
}

TEST(Protocol, WorkedExampleInSpec) {
    const Bytes req = spec_example("request");
    const Bytes rep = spec_example("reply");
    ASSERT_EQ(req.size(), 13u);
    ASSERT_EQ(rep.size(), 13u);
    EXPECT_EQ(request("hello"), req);

    echo::Session session(echo::kDefaultMaxPayload);
    std::size_t room = 0;
    std::uint8_t* space = session.read_space(room);
    ASSERT_GE(room, req.size());
    std::copy(req.begin(), req.end(), space);
    EXPECT_EQ(session.commit(req.size()), std::nullopt);
    EXPECT_EQ(Bytes(session.pending(), session.pending() + session.pending_size()), rep);

    const echo::Header h = echo::decode_header(rep.data());
    EXPECT_EQ(h.length, 5u);
    EXPECT_EQ(h.type, static_cast<std::uint16_t>(echo::Type::kReply));
    EXPECT_EQ(h.reserved, 0u);
    EXPECT_EQ(std::string(rep.begin() + echo::kHeaderSize, rep.end()), "hello");
}

TEST(Protocol, HeaderIsBigEndian) {
    std::uint8_t head[echo::kHeaderSize];
    echo::encode_header(head, echo::Type::kRequest, 0x01020304u);
    EXPECT_EQ(Bytes(head, head + 8), (Bytes{1, 2, 3, 4, 0, 1, 0, 0}));
    const echo::Header h = echo::decode_header(head);
    EXPECT_EQ(h.length, 0x01020304u);
    EXPECT_EQ(h.type, 1u);
}

TEST(Protocol, RequestChecksInSpecOrder) {
    EXPECT_EQ(echo::check_request({100, 1, 0}, 100), std::nullopt);  // the maximum is allowed
    EXPECT_EQ(echo::check_request({101, 1, 0}, 100),
              "payload length 101 exceeds the maximum 100");
    EXPECT_EQ(echo::check_request({101, 2, 0}, 100), "unknown message type 0x0002");
    EXPECT_EQ(echo::check_request({101, 2, 0x0101}, 100),
              "reserved header field is 0x0101, not 0");
}

// Pipelined requests split at every possible byte boundary give the same replies.
TEST(Protocol, SessionAnswersPipelinedRequestsAtAnySplit) {
    Bytes stream = request("a");
    const Bytes second = request("");
    const Bytes third = request(std::string(300, 'z'));
    stream.insert(stream.end(), second.begin(), second.end());
    stream.insert(stream.end(), third.begin(), third.end());
    Bytes expected;
    echo::encode(expected, echo::Type::kReply, reinterpret_cast<const std::uint8_t*>("a"), 1);
    echo::encode(expected, echo::Type::kReply, nullptr, 0);
    echo::encode(expected, echo::Type::kReply, third.data() + echo::kHeaderSize, 300);
    for (std::size_t split = 0; split <= stream.size(); ++split) {
        echo::Session session(1000);
        Bytes out;
        for (const auto& [from, to] : {std::pair{std::size_t{0}, split}, {split, stream.size()}}) {
            std::size_t room = 0;
            std::uint8_t* space = session.read_space(room);
            ASSERT_GE(room, to - from);
            std::copy(stream.begin() + static_cast<long>(from),
                      stream.begin() + static_cast<long>(to), space);
            ASSERT_EQ(session.commit(to - from), std::nullopt);
            out.insert(out.end(), session.pending(), session.pending() + session.pending_size());
            session.consumed(session.pending_size());
        }
        EXPECT_EQ(out, expected) << "split at " << split;
        EXPECT_EQ(session.messages(), 3u);
        EXPECT_EQ(session.partial(), 0u);
    }
}

TEST(Protocol, SessionDescribesPartialMessages) {
    echo::Session session(1000);
    const Bytes req = request("0123456789");
    std::size_t room = 0;
    std::copy(req.begin(), req.begin() + 5, session.read_space(room));
    ASSERT_EQ(session.commit(5), std::nullopt);
    EXPECT_EQ(session.describe_partial(), "5 of 8 header bytes");
    std::copy(req.begin() + 5, req.begin() + 11, session.read_space(room));
    ASSERT_EQ(session.commit(6), std::nullopt);
    EXPECT_EQ(session.describe_partial(), "3 of 10 payload bytes");
    EXPECT_EQ(session.pending_size(), 0u);
}

// -- /proc status --------------------------------------------------------------------------------

TEST(ProcStatus, ParsesNameAndSwitches) {
    const std::string text =
        "Name:\ttpc-client-7\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t42\n"
        "voluntary_ctxt_switches:\t1234\nnonvoluntary_ctxt_switches:\t56\n";
    const auto fields = ctxsw::parse_status(text);
    ASSERT_TRUE(fields.has_value());
    EXPECT_EQ(fields->name, "tpc-client-7");
    EXPECT_EQ(fields->voluntary, 1234u);
    EXPECT_EQ(fields->involuntary, 56u);
}

TEST(ProcStatus, RejectsMissingOrBadFields) {
    EXPECT_EQ(ctxsw::parse_status("Name:\tx\nvoluntary_ctxt_switches:\t1\n"), std::nullopt);
    EXPECT_EQ(ctxsw::parse_status("voluntary_ctxt_switches:\t1\nnonvoluntary_ctxt_switches:\t2\n"),
              std::nullopt);
    EXPECT_EQ(ctxsw::parse_status(
                  "Name:\tx\nvoluntary_ctxt_switches:\t1x\nnonvoluntary_ctxt_switches:\t2\n"),
              std::nullopt);
    EXPECT_EQ(ctxsw::parse_status(""), std::nullopt);
}

TEST(ProcStatus, ReadsThisProcessAndCapturesAThreadAtExit) {
    ctxsw::ThreadSwitches captured;
    long tid = 0;
    std::vector<ctxsw::ThreadSwitches> live;
    std::thread t([&] {
        pthread_setname_np(pthread_self(), "probe-thread");
        tid = static_cast<long>(syscall(SYS_gettid));
        live = ctxsw::read_tasks("/proc/self");
        captured = ctxsw::capture_current_thread();
    });
    t.join();
    const auto me = std::find_if(live.begin(), live.end(),
                                 [&](const ctxsw::ThreadSwitches& r) { return r.tid == tid; });
    ASSERT_NE(me, live.end());
    EXPECT_EQ(me->name, "probe-thread");
    EXPECT_EQ(me->state, "live");
    EXPECT_EQ(captured.name, "probe-thread");
    EXPECT_EQ(captured.tid, tid);
    EXPECT_EQ(captured.state, "exited");
    EXPECT_GE(captured.voluntary, me->voluntary);
    EXPECT_TRUE(std::is_sorted(live.begin(), live.end(), [](const auto& a, const auto& b) {
        return a.tid < b.tid;
    }));
}

TEST(ContextSwitchTable, SmallGroupsRowByRowLargeGroupsSummarised) {
    std::vector<ctxsw::ThreadSwitches> rows{{"tcp_echo_server", 100, "live", 5, 1},
                                            {"tpc-accept", 101, "exited", 40, 2}};
    for (long i = 1; i <= 9; ++i) {
        rows.push_back({"tpc-client-" + std::to_string(i), 101 + i, i <= 3 ? "live" : "exited",
                        10, 1});
    }
    const std::string expected =
        "thread                            tid  state                   voluntary  involuntary\n"
        "tcp_echo_server                   100  live                            5            1\n"
        "tpc-accept                        101  exited                         40            2\n"
        "tpc-client-* (9 threads)            -  6 exited, 3 live               90            9\n"
        "total (11 threads)                  -                                135           12\n";
    EXPECT_EQ(ctxsw::format_table(rows), expected);
    const std::string two_rows = ctxsw::format_table({rows[2], rows[3]});
    EXPECT_NE(two_rows.find("\ntpc-client-1                      102  live "), std::string::npos)
        << two_rows;
    EXPECT_NE(two_rows.find("\ntotal (2 threads) "), std::string::npos) << two_rows;
}

TEST(ContextSwitchTable, DeltasMarkNewThreadsAndCountGoneOnes) {
    const std::vector<ctxsw::ThreadSwitches> before{{"main", 1, "live", 10, 2},
                                                    {"old", 2, "live", 1, 1}};
    const std::vector<ctxsw::ThreadSwitches> after{{"main", 1, "live", 15, 3},
                                                   {"tpc-client-1", 3, "live", 7, 0}};
    std::size_t gone = 0;
    const auto d = ctxsw::deltas(before, after, gone);
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(d[0].voluntary, 5u);
    EXPECT_EQ(d[0].involuntary, 1u);
    EXPECT_EQ(d[0].state, "live");
    EXPECT_EQ(d[1].voluntary, 7u);
    EXPECT_EQ(d[1].state, "new");
    EXPECT_EQ(gone, 1u);
}

// -- the servers ---------------------------------------------------------------------------------

/// Log lines of a server, kept for exact comparison.
class LogCapture {
public:
    dbgkit::targets::Logger logger() {
        return [this](const std::string& line) {
            std::lock_guard<std::mutex> lock(mutex_);
            lines_.push_back(line);
        };
    }
    std::vector<std::string> lines() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return lines_;
    }

private:
    mutable std::mutex mutex_;
    std::vector<std::string> lines_;
};

/// Polls PREDICATE every millisecond for up to MS milliseconds (default 4 s).
bool eventually(const std::function<bool()>& predicate, int ms = kTimeoutMs) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
    while (Clock::now() < deadline) {
        if (predicate()) {
            return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return predicate();
}

/// A connected client socket, closed on destruction.
class Conn {
public:
    explicit Conn(std::uint16_t port) {
        int err = 0;
        fd_ = client::connect_tcp("127.0.0.1", port, kTimeoutMs, err);
        EXPECT_GE(fd_, 0) << "connect: " << std::strerror(err);
    }
    ~Conn() { close(); }
    Conn(const Conn&) = delete;
    Conn& operator=(const Conn&) = delete;
    int fd() const { return fd_; }
    void close() {
        if (fd_ >= 0) {
            ::close(fd_);
            fd_ = -1;
        }
    }
    /// "127.0.0.1:PORT" of this end, as the server's log names the peer.
    std::string address() const {
        sockaddr_in a{};
        socklen_t len = sizeof a;
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
        return dbgkit::targets::detail::format_address(a);
    }
    client::Status send(const Bytes& bytes, int timeout_ms = kTimeoutMs) {
        int err = 0;
        return client::send_all(fd_, bytes.data(), bytes.size(),
                                Clock::now() + std::chrono::milliseconds(timeout_ms), err);
    }
    /// One ping-pong; the echoed payload must be exactly PAYLOAD.
    ::testing::AssertionResult echo(const Bytes& payload) {
        Bytes req;
        echo::encode(req, echo::Type::kRequest, payload.data(),
                     static_cast<std::uint32_t>(payload.size()));
        Bytes reply;
        int err = 0;
        const client::Status s = client::exchange(
            fd_, req, static_cast<std::uint32_t>(payload.size()), reply, kTimeoutMs, err);
        if (s != client::Status::kOk) {
            return ::testing::AssertionFailure() << client::status_name(s) << " errno " << err;
        }
        if (reply != payload) {
            return ::testing::AssertionFailure() << "payload of " << payload.size()
                                                 << " bytes echoed differently";
        }
        return ::testing::AssertionSuccess();
    }
    /// True when the server has closed the connection (end of stream or reset) within 4 s.
    bool closed_by_server() {
        std::uint8_t byte = 0;
        int err = 0;
        const client::Status s = client::recv_exact(fd_, &byte, 1, deadline(), err);
        return s == client::Status::kClosed || s == client::Status::kReset;
    }
    /// True when nothing arrives within MS milliseconds.
    bool silent_for(int ms) {
        pollfd p{fd_, POLLIN, 0};
        return ::poll(&p, 1, ms) == 0;
    }

private:
    static Clock::time_point deadline() {
        return Clock::now() + std::chrono::milliseconds(kTimeoutMs);
    }
    int fd_ = -1;
};

Bytes make_payload(std::size_t size, std::uint32_t seed) {
    Bytes b(size);
    for (std::size_t i = 0; i < size; ++i) {
        b[i] = static_cast<std::uint8_t>(seed * 31 + i * 7 + (i >> 8));
    }
    return b;
}

class Servers : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override { server_ = start(echo::kDefaultMaxPayload); }
    void TearDown() override {
        if (server_) {
            server_->stop();
        }
    }
    std::unique_ptr<TCPServer> start(std::uint32_t max_payload) {
        ServerOptions options;
        options.max_payload = max_payload;
        options.log = log_.logger();
        auto server = dbgkit::targets::make_server(GetParam(), options);
        server->start();
        return server;
    }
    std::uint16_t port() const { return server_->port(); }
    bool no_peers() {
        return eventually([&] { return server_->peer_count() == 0; });
    }

    LogCapture log_;
    std::unique_ptr<TCPServer> server_;
};

INSTANTIATE_TEST_SUITE_P(, Servers, ::testing::Values("threads", "epoll", "epoll-et"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                             std::string name = info.param;
                             std::replace(name.begin(), name.end(), '-', '_');
                             return name;
                         });

TEST_P(Servers, SixtyFourClientsAtOnceGetTheirOwnBytesBack) {
    constexpr int kClients = 64;
    constexpr int kPings = 20;
    std::vector<std::string> failures(kClients);
    std::vector<std::thread> threads;
    for (int c = 0; c < kClients; ++c) {
        threads.emplace_back([&, c] {
            Conn conn(port());
            for (int k = 0; k < kPings; ++k) {
                const auto result = conn.echo(make_payload(static_cast<std::size_t>(1 + c * 37 + k),
                                                           static_cast<std::uint32_t>(c * 100 + k)));
                if (!result) {
                    failures[static_cast<std::size_t>(c)] = result.message();
                    return;
                }
            }
        });
    }
    for (std::thread& t : threads) {
        t.join();
    }
    for (int c = 0; c < kClients; ++c) {
        EXPECT_EQ(failures[static_cast<std::size_t>(c)], "") << "client " << c;
    }
    ASSERT_TRUE(no_peers());
    const auto stats = server_->stats();
    EXPECT_EQ(stats.accepted, 64u);
    EXPECT_EQ(stats.closed, 64u);
    EXPECT_EQ(stats.dropped, 0u);
    EXPECT_EQ(stats.messages, 64u * 20u);
    EXPECT_EQ(log_.lines(), std::vector<std::string>{});
}

TEST_P(Servers, PipelinedRequestsAreAnsweredInOrder) {
    Conn conn(port());
    Bytes burst;
    for (const char* text : {"one", "", "three"}) {
        const Bytes r = request(text);
        burst.insert(burst.end(), r.begin(), r.end());
    }
    ASSERT_EQ(conn.send(burst), client::Status::kOk);
    Bytes expected;
    for (const std::string text : {"one", "", "three"}) {
        echo::encode(expected, echo::Type::kReply,
                     reinterpret_cast<const std::uint8_t*>(text.data()),
                     static_cast<std::uint32_t>(text.size()));
    }
    Bytes got(expected.size());
    int err = 0;
    ASSERT_EQ(client::recv_exact(conn.fd(), got.data(), got.size(),
                                 Clock::now() + std::chrono::milliseconds(kTimeoutMs), err),
              client::Status::kOk);
    EXPECT_EQ(got, expected);
}

TEST_P(Servers, PeersLeavingMidMessageAreDroppedOthersServed) {
    Conn steady(port());
    ASSERT_TRUE(steady.echo(make_payload(10, 1)));  // peer 1
    const Bytes req = request("0123456789");
    {
        Conn header_only(port());  // peer 2
        ASSERT_EQ(header_only.send(Bytes(req.begin(), req.begin() + 5)), client::Status::kOk);
        const std::string address = header_only.address();
        ASSERT_TRUE(eventually([&] { return server_->peer_count() == 2; }));
        header_only.close();
        ASSERT_TRUE(eventually([&] { return log_.lines().size() == 1; }));
        EXPECT_EQ(log_.lines()[0],
                  "peer 2 (" + address + ") dropped: closed mid-message (5 of 8 header bytes)");
    }
    ASSERT_TRUE(steady.echo(make_payload(100, 2)));
    {
        Conn part_payload(port());  // peer 3
        ASSERT_EQ(part_payload.send(Bytes(req.begin(), req.begin() + 11)), client::Status::kOk);
        const std::string address = part_payload.address();
        ASSERT_TRUE(eventually([&] { return server_->peer_count() == 2; }));
        part_payload.close();
        ASSERT_TRUE(eventually([&] { return log_.lines().size() == 2; }));
        EXPECT_EQ(log_.lines()[1],
                  "peer 3 (" + address + ") dropped: closed mid-message (3 of 10 payload bytes)");
    }
    ASSERT_TRUE(steady.echo(make_payload(1000, 3)));
    steady.close();
    ASSERT_TRUE(no_peers());
    const auto stats = server_->stats();
    EXPECT_EQ(stats.dropped, 2u);
    EXPECT_EQ(stats.closed, 1u);
    EXPECT_EQ(stats.messages, 3u);
}

TEST_P(Servers, GarbageAndOversizedHeadersDropOnlyThatPeer) {
    Conn steady(port());
    ASSERT_TRUE(steady.echo(make_payload(16, 1)));  // peer 1
    const std::string http = "GET / HTTP/1.1\r\n\r\n";
    const std::vector<std::pair<Bytes, std::string>> cases{
        {Bytes(http.begin(), http.end()), "reserved header field is 0x4854, not 0"},  // "HT"
        {Bytes{0, 0, 0, 4, 'x', 'y', 0, 0, 1, 2, 3, 4}, "unknown message type 0x7879"},
        {Bytes{0, 0, 0, 0, 0, 1, 1, 1}, "reserved header field is 0x0101, not 0"},
        {Bytes{0, 0x1e, 0x84, 0x80, 0, 1, 0, 0, 'a'},
         "payload length 2000000 exceeds the maximum 1048576"},
        {request("ok-then-bad"), ""},  // a good request first, then a reply type (below)
    };
    std::vector<std::string> expected_log;
    std::uint64_t peer = 1;
    for (const auto& [bytes, why] : cases) {
        Conn bad(port());
        ++peer;
        Bytes sent = bytes;
        std::string reason = why;
        if (why.empty()) {
            ASSERT_TRUE(bad.echo(Bytes{'o', 'k'}));
            echo::encode(sent, echo::Type::kReply, nullptr, 0);
            sent.erase(sent.begin(), sent.begin() + static_cast<long>(bytes.size()));
            reason = "unknown message type 0x0002";
        }
        expected_log.push_back("peer " + std::to_string(peer) + " (" + bad.address() +
                               ") dropped: " + reason);
        ASSERT_EQ(bad.send(sent), client::Status::kOk);
        EXPECT_TRUE(bad.closed_by_server()) << reason;
        ASSERT_TRUE(eventually([&] { return log_.lines().size() == expected_log.size(); }));
        ASSERT_TRUE(steady.echo(make_payload(64, static_cast<std::uint32_t>(peer))));
    }
    EXPECT_EQ(log_.lines(), expected_log);
    EXPECT_EQ(server_->stats().dropped, 5u);
    steady.close();
    ASSERT_TRUE(no_peers());
}

TEST_P(Servers, RequestSentOneByteAtATimeIsAnsweredOnlyWhenComplete) {
    Conn conn(port());
    const Bytes payload = make_payload(300, 9);
    Bytes req;
    echo::encode(req, echo::Type::kRequest, payload.data(), 300);
    for (std::size_t i = 0; i + 1 < req.size(); ++i) {
        ASSERT_EQ(conn.send(Bytes{req[i]}), client::Status::kOk);
    }
    EXPECT_TRUE(conn.silent_for(50)) << "a reply before the request was complete";
    ASSERT_EQ(conn.send(Bytes{req.back()}), client::Status::kOk);
    Bytes got(echo::kHeaderSize + 300);
    int err = 0;
    ASSERT_EQ(client::recv_exact(conn.fd(), got.data(), got.size(),
                                 Clock::now() + std::chrono::milliseconds(kTimeoutMs), err),
              client::Status::kOk);
    Bytes expected;
    echo::encode(expected, echo::Type::kReply, payload.data(), 300);
    EXPECT_EQ(got, expected);
    EXPECT_TRUE(conn.echo(make_payload(1, 1)));
}

// Four 1.5 MiB requests sent back to back while another thread reads: far beyond the socket
// buffers, so the server sees partial reads, partial writes and EAGAIN. The whole exchange gets
// 15 s, not 4: under TSan copying and comparing 12 MiB takes seconds.
TEST_P(Servers, LargePipelinedPayloadsBeyondSocketBuffers) {
    server_->stop();
    server_ = start(4u << 20);
    Conn conn(port());
    constexpr std::size_t kSize = 3u << 19;
    constexpr int kCount = 4;
    Bytes stream;
    std::vector<Bytes> payloads;
    for (int i = 0; i < kCount; ++i) {
        payloads.push_back(make_payload(kSize, static_cast<std::uint32_t>(i + 5)));
        echo::encode(stream, echo::Type::kRequest, payloads.back().data(), kSize);
    }
    client::Status sent = client::Status::kError;
    std::thread sender([&] { sent = conn.send(stream, 15000); });
    Bytes got(stream.size());
    int err = 0;
    const client::Status received = client::recv_exact(
        conn.fd(), got.data(), got.size(), Clock::now() + std::chrono::seconds(15), err);
    sender.join();
    ASSERT_EQ(sent, client::Status::kOk);
    ASSERT_EQ(received, client::Status::kOk) << "errno " << err;
    Bytes expected;
    for (const Bytes& p : payloads) {
        echo::encode(expected, echo::Type::kReply, p.data(), kSize);
    }
    EXPECT_TRUE(got == expected);
    EXPECT_EQ(server_->stats().messages, 4u);
}

// A client that pipelines 40 MiB of requests without reading: the server stops reading it once
// its replies back up (the reactor at kHighWater, a client thread while it waits for POLLOUT), so
// the sender blocks instead of the server buffering everything; reading then drains it all.
TEST_P(Servers, ClientThatDoesNotReadIsThrottled) {
    server_->stop();
    server_ = start(2u << 20);
    Conn conn(port());
    constexpr std::size_t kSize = 1u << 20;
    constexpr int kCount = 40;
    const Bytes payload = make_payload(kSize, 77);
    Bytes stream;
    for (int i = 0; i < kCount; ++i) {
        echo::encode(stream, echo::Type::kRequest, payload.data(), kSize);
    }
    std::atomic<bool> done{false};
    client::Status sent = client::Status::kError;
    std::thread sender([&] {
        sent = conn.send(stream, 20000);
        done = true;
    });
    EXPECT_FALSE(eventually([&] { return done.load(); }, 300)) << "40 MiB went out unread";
    EXPECT_LT(server_->stats().messages, 40u);
    Bytes got(stream.size());
    int err = 0;
    const client::Status received = client::recv_exact(
        conn.fd(), got.data(), got.size(), Clock::now() + std::chrono::seconds(20), err);
    sender.join();
    ASSERT_EQ(sent, client::Status::kOk);
    ASSERT_EQ(received, client::Status::kOk) << "errno " << err;
    Bytes expected;
    echo::encode(expected, echo::Type::kReply, payload.data(), kSize);
    for (int i = 0; i < kCount; ++i) {
        ASSERT_TRUE(std::equal(expected.begin(), expected.end(),
                               got.begin() + static_cast<long>(i * expected.size())))
            << "reply " << i;
    }
    EXPECT_EQ(server_->stats().messages, 40u);
}

TEST_P(Servers, StopWithClientsConnectedJoinsEverything) {
    std::vector<std::unique_ptr<Conn>> conns;
    for (int i = 0; i < 10; ++i) {
        conns.push_back(std::make_unique<Conn>(port()));
        ASSERT_TRUE(conns.back()->echo(make_payload(8, static_cast<std::uint32_t>(i))));
    }
    ASSERT_EQ(conns[0]->send(Bytes{0, 0, 0, 9, 0, 1}), client::Status::kOk);  // mid-message
    const auto start = Clock::now();
    server_->stop();
    EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
    EXPECT_EQ(server_->peer_count(), 0u);
    for (auto& conn : conns) {
        EXPECT_TRUE(conn->closed_by_server());
    }
    const auto stats = server_->stats();
    EXPECT_EQ(stats.accepted, 10u);
    EXPECT_EQ(stats.closed + stats.dropped, 0u);  // closed by the shutdown, not counted as left
    EXPECT_EQ(stats.at_shutdown, 10u);
    EXPECT_EQ(log_.lines(), std::vector<std::string>{});
    const auto rows = server_->context_switches();
    const std::size_t exited = static_cast<std::size_t>(std::count_if(
        rows.begin(), rows.end(), [](const auto& r) { return r.state == "exited"; }));
    EXPECT_EQ(exited, GetParam() == "threads" ? 11u : 1u);  // every server thread has ended
}

TEST_P(Servers, ContextSwitchTableNamesTheServerThreads) {
    std::vector<std::unique_ptr<Conn>> conns;
    for (int i = 0; i < 12; ++i) {
        conns.push_back(std::make_unique<Conn>(port()));
        ASSERT_TRUE(conns.back()->echo(make_payload(8, static_cast<std::uint32_t>(i))));
    }
    auto count = [&](const std::string& name, const std::string& state) {
        const auto rows = server_->context_switches();
        return std::count_if(rows.begin(), rows.end(), [&](const ctxsw::ThreadSwitches& r) {
            return r.name == name && r.state == state;
        });
    };
    if (GetParam() == "threads") {
        EXPECT_EQ(count("tpc-accept", "live"), 1);
        for (int i = 1; i <= 12; ++i) {
            EXPECT_EQ(count("tpc-client-" + std::to_string(i), "live"), 1) << i;
        }
        conns[0]->close();
        EXPECT_TRUE(eventually([&] { return count("tpc-client-1", "exited") == 1; }));
        EXPECT_EQ(count("tpc-client-1", "live"), 0);
        const std::string table = ctxsw::format_table(server_->context_switches());
        EXPECT_NE(table.find("\ntpc-client-* (12 threads)           -  1 exited, 11 live "),
                  std::string::npos)
            << table;
        EXPECT_NE(table.find("\ntpc-accept "), std::string::npos) << table;
    } else {
        EXPECT_EQ(count("reactor", "live"), 1);
        EXPECT_EQ(count("tpc-accept", "live"), 0);
        server_->stop();
        EXPECT_EQ(count("reactor", "exited"), 1);
        const std::string table = ctxsw::format_table(server_->context_switches());
        EXPECT_NE(table.find("\nreactor "), std::string::npos) << table;
    }
}

}  // namespace
