// @brief shmemq tests: FIFO across processes, limits, refusals, dead peers, stale segments, format.
#include "shmemq.h"
#include "shmemq_testing.h"
#include "test_shmemq_common.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <sched.h>
#include <sys/stat.h>

namespace dbgkit::targets {
namespace {

using namespace std::chrono_literals;
using shmemq_test::Child;
using shmemq_test::ScopedName;
using shmemq_test::Signal;

struct Kind {
    shmemq_lock_kind lock;
    bool robust;
    const char* label;
};

const Kind kKinds[] = {
    {SHMEMQ_LOCK_NORMAL, true, "normal_robust"},
    {SHMEMQ_LOCK_ADAPTIVE, true, "adaptive_robust"},
    {SHMEMQ_LOCK_NORMAL, false, "normal_plain"},
    {SHMEMQ_LOCK_ADAPTIVE, false, "adaptive_plain"},
    {SHMEMQ_LOCK_LOCKFREE, false, "lockfree"},
};

// Names the parameter in test names and failure messages (not "16-byte object <...>").
void PrintTo(const Kind& kind, std::ostream* os) { *os << kind.label; }

shmemq_options options_for(const Kind& kind) {
    shmemq_options o;
    shmemq_options_init(&o);
    o.lock = kind.lock;
    o.robust = kind.robust ? 1 : 0;
    return o;
}

std::string dequeue_string(shmemq_t* q, int capacity = 256) {
    std::vector<char> buf(static_cast<std::size_t>(capacity));
    int len = -1;
    if (!shmemq_try_dequeue_len(q, buf.data(), capacity, &len)) return "<none>";
    return std::string(buf.data(), static_cast<std::size_t>(len));
}

bool enqueue_string(shmemq_t* q, const std::string& s) {
    return shmemq_try_enqueue(q, const_cast<char*>(s.data()), static_cast<int>(s.size()));
}

std::vector<unsigned char> read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), {});
}

std::uint32_t u32_at(const std::vector<unsigned char>& bytes, std::size_t offset) {
    std::uint32_t v = 0;
    std::memcpy(&v, bytes.data() + offset, sizeof v);
    return v;
}

class ShmemqKindTest : public ::testing::TestWithParam<Kind> {};

INSTANTIATE_TEST_SUITE_P(Kinds, ShmemqKindTest, ::testing::ValuesIn(kKinds),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                             return std::string(info.param.label);
                         });

// Message I of the FIFO test: (I % 65) bytes, byte J = (I * 7 + J) & 0xff.
std::vector<unsigned char> fifo_message(std::uint32_t i) {
    std::vector<unsigned char> m(i % 65);
    for (std::size_t j = 0; j < m.size(); ++j) m[j] = static_cast<unsigned char>(i * 7 + j);
    return m;
}

// A child process produces 3000 messages of varying lengths through a 7-slot queue; the parent
// receives them and checks the exact sequence (each length and every byte).
TEST_P(ShmemqKindTest, FifoAcrossTwoProcesses) {
    constexpr std::uint32_t kCount = 3000;
    ScopedName name("fifo");
    shmemq_options o = options_for(GetParam());
    shmemq_t* q = shmemq_open(name.c_str(), 7, 64, &o);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    Child child([&] {
        shmemq_t* mine = shmemq_open(name.c_str(), 7, 64, &o);
        if (mine == nullptr) return 2;
        const auto deadline = std::chrono::steady_clock::now() + 4s;
        for (std::uint32_t i = 0; i < kCount; ++i) {
            std::vector<unsigned char> m = fifo_message(i);
            while (!shmemq_try_enqueue(mine, m.data(), static_cast<int>(m.size()))) {
                if (errno != EAGAIN || std::chrono::steady_clock::now() > deadline) return 3;
                sched_yield();  // let the consumer run when the cores are oversubscribed
            }
        }
        shmemq_destroy(mine, 0);
        return 0;
    });
    const auto deadline = std::chrono::steady_clock::now() + 4s;
    std::uint32_t received = 0;
    unsigned char buf[64];
    while (received < kCount && std::chrono::steady_clock::now() < deadline) {
        int len = -1;
        if (!shmemq_try_dequeue_len(q, buf, sizeof buf, &len)) {
            ASSERT_EQ(errno, EAGAIN) << shmemq_last_error();
            sched_yield();
            continue;
        }
        const std::vector<unsigned char> want = fifo_message(received);
        ASSERT_EQ(std::vector<unsigned char>(buf, buf + len), want) << "message " << received;
        ++received;
    }
    EXPECT_EQ(received, kCount);
    EXPECT_EQ(child.wait(4s), 0);
    EXPECT_EQ(shmemq_count(q), 0u);
    EXPECT_FALSE(shmemq_try_dequeue(q, buf, sizeof buf));
    shmemq_destroy(q, 1);
}

TEST_P(ShmemqKindTest, FullAndEmptyAtExactCounts) {
    ScopedName name("full");
    shmemq_options o = options_for(GetParam());
    shmemq_t* q = shmemq_open(name.c_str(), 3, 16, &o);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    char buf[16];
    errno = 0;
    EXPECT_FALSE(shmemq_try_dequeue(q, buf, sizeof buf));
    EXPECT_EQ(errno, EAGAIN);
    EXPECT_TRUE(enqueue_string(q, "a"));
    EXPECT_TRUE(enqueue_string(q, "bb"));
    EXPECT_TRUE(enqueue_string(q, "ccc"));
    EXPECT_EQ(shmemq_count(q), 3u);
    errno = 0;
    EXPECT_FALSE(enqueue_string(q, "dddd"));
    EXPECT_EQ(errno, EAGAIN);
    EXPECT_EQ(shmemq_count(q), 3u);
    EXPECT_EQ(dequeue_string(q), "a");
    EXPECT_TRUE(enqueue_string(q, "dddd"));  // wraps around
    EXPECT_FALSE(enqueue_string(q, "e"));
    EXPECT_EQ(dequeue_string(q), "bb");
    EXPECT_EQ(dequeue_string(q), "ccc");
    EXPECT_EQ(dequeue_string(q), "dddd");
    EXPECT_EQ(dequeue_string(q), "<none>");
    EXPECT_EQ(errno, EAGAIN);
    EXPECT_EQ(shmemq_count(q), 0u);
    shmemq_destroy(q, 1);
}

TEST_P(ShmemqKindTest, OversizeMessageRefusedQueueUnchanged) {
    ScopedName name("oversize");
    shmemq_options o = options_for(GetParam());
    shmemq_t* q = shmemq_open(name.c_str(), 4, 8, &o);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    ASSERT_TRUE(enqueue_string(q, "first"));
    errno = 0;
    EXPECT_FALSE(enqueue_string(q, "123456789"));
    EXPECT_EQ(errno, EMSGSIZE);
    EXPECT_NE(std::string(shmemq_last_error()).find("9 bytes"), std::string::npos)
        << shmemq_last_error();
    errno = 0;
    EXPECT_FALSE(shmemq_try_enqueue(q, nullptr, -1));
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(shmemq_count(q), 1u);
    EXPECT_TRUE(enqueue_string(q, "12345678"));  // exactly element_size fits
    EXPECT_EQ(dequeue_string(q), "first");
    EXPECT_EQ(dequeue_string(q), "12345678");
    EXPECT_EQ(dequeue_string(q), "<none>");
    shmemq_destroy(q, 1);
}

TEST_P(ShmemqKindTest, SmallDequeueBufferRefusedWithoutLoss) {
    ScopedName name("smallbuf");
    shmemq_options o = options_for(GetParam());
    shmemq_t* q = shmemq_open(name.c_str(), 4, 32, &o);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    ASSERT_TRUE(enqueue_string(q, "ten bytes!"));
    ASSERT_TRUE(enqueue_string(q, ""));
    char small[4] = {'x', 'x', 'x', 'x'};
    int len = -1;
    errno = 0;
    EXPECT_FALSE(shmemq_try_dequeue_len(q, small, sizeof small, &len));
    EXPECT_EQ(errno, EMSGSIZE);
    EXPECT_EQ(len, 10);
    EXPECT_EQ(std::string(small, 4), "xxxx");
    EXPECT_EQ(shmemq_count(q), 2u);
    EXPECT_EQ(dequeue_string(q, 10), "ten bytes!");
    EXPECT_EQ(dequeue_string(q, 0), "");  // an empty message fits an empty buffer
    shmemq_destroy(q, 1);
}

TEST(Shmemq, GeometryMismatchRefused) {
    ScopedName name("geometry");
    shmemq_t* q = shmemq_new(name.c_str(), 4, 16);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    struct Case {
        unsigned long max_count;
        unsigned element_size;
        shmemq_lock_kind lock;
        int robust;
        const char* asked;
    };
    const Case cases[] = {
        {5, 16, SHMEMQ_LOCK_NORMAL, 1, "max_count=5 element_size=16 lock=normal (robust)"},
        {4, 32, SHMEMQ_LOCK_NORMAL, 1, "max_count=4 element_size=32 lock=normal (robust)"},
        {4, 16, SHMEMQ_LOCK_ADAPTIVE, 1, "max_count=4 element_size=16 lock=adaptive (robust)"},
        {4, 16, SHMEMQ_LOCK_NORMAL, 0, "max_count=4 element_size=16 lock=normal (not robust)"},
        {4, 16, SHMEMQ_LOCK_LOCKFREE, 1, "max_count=4 element_size=16 lock=lockfree"},
    };
    for (const Case& c : cases) {
        shmemq_options o;
        shmemq_options_init(&o);
        o.lock = c.lock;
        o.robust = c.robust;
        errno = 0;
        EXPECT_EQ(shmemq_open(name.c_str(), c.max_count, c.element_size, &o), nullptr);
        EXPECT_EQ(errno, EINVAL);
        const std::string want = std::string("queue '") + name.str() +
                                 "' exists with max_count=4 element_size=16 lock=normal (robust); "
                                 "asked for " + c.asked;
        EXPECT_EQ(shmemq_last_error(), want);
    }
    shmemq_t* same = shmemq_new(name.c_str(), 4, 16);
    EXPECT_NE(same, nullptr) << shmemq_last_error();
    shmemq_destroy(same, 0);
    shmemq_destroy(q, 1);
}

TEST(Shmemq, BadNamesRefused) {
    const std::string too_long = "/" + std::string(255, 'n');
    const char* names[] = {"", "noslash", "/", "/a/b", "/a/", "//", "/.", "/..", too_long.c_str()};
    for (const char* name : names) {
        errno = 0;
        EXPECT_EQ(shmemq_new(name, 4, 16), nullptr) << "'" << name << "'";
        EXPECT_EQ(errno, EINVAL) << "'" << name << "'";
        EXPECT_STRNE(shmemq_last_error(), "") << "'" << name << "'";
    }
    errno = 0;
    EXPECT_EQ(shmemq_new(nullptr, 4, 16), nullptr);
    EXPECT_EQ(errno, EINVAL);
    ScopedName ok("ok");
    EXPECT_EQ(shmemq_new(ok.c_str(), 0, 16), nullptr);  // zero slots
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(shmemq_new(ok.c_str(), 4, 0), nullptr);  // zero-byte elements
    EXPECT_EQ(errno, EINVAL);
    // The longest name accepted: '/' and 254 characters (NAME_MAX of /dev/shm is 255).
    const std::string longest = ok.str() + std::string(255 - ok.str().size(), 'n');
    shmemq_t* q = shmemq_new(longest.c_str(), 1, 1);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    shmemq_destroy(q, 1);
}

TEST(Shmemq, SegmentIsMode0600OwnedByUsWhateverTheUmask) {
    ScopedName name("mode");
    const mode_t old = umask(0);
    shmemq_t* q = shmemq_new(name.c_str(), 2, 8);
    umask(old);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    const int fd = open(name.path().c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    struct stat st {};
    ASSERT_EQ(fstat(fd, &st), 0);
    close(fd);
    EXPECT_EQ(st.st_mode & 07777, 0600u);
    EXPECT_EQ(st.st_uid, geteuid());
    EXPECT_EQ(st.st_size, 320 + 2 * 16);
    shmemq_destroy(q, 1);
}

TEST(Shmemq, SegmentWithWiderModeRefused) {
    ScopedName name("widemode");
    shmemq_t* q = shmemq_new(name.c_str(), 2, 8);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    ASSERT_EQ(chmod(name.path().c_str(), 0644), 0);
    errno = 0;
    EXPECT_EQ(shmemq_new(name.c_str(), 2, 8), nullptr);
    EXPECT_EQ(errno, EACCES);
    EXPECT_EQ(shmemq_last_error(),
              "queue '" + name.str() + "' has mode 0644, not 0600; not opened");
    shmemq_destroy(q, 1);
}

TEST(Shmemq, SegmentOfAnotherUserRefused) {
    if (geteuid() != 0) {
        GTEST_SKIP() << "needs root to give the segment to uid 65534 (fchown); running as uid "
                     << geteuid();
    }
    ScopedName name("owner");
    shmemq_t* q = shmemq_new(name.c_str(), 2, 8);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    const int fd = shm_open(name.c_str(), O_RDWR, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(fchown(fd, 65534, 65534), 0) << std::strerror(errno);
    close(fd);
    errno = 0;
    EXPECT_EQ(shmemq_new(name.c_str(), 2, 8), nullptr);
    EXPECT_EQ(errno, EACCES);
    EXPECT_EQ(shmemq_last_error(), "queue '" + name.str() +
                                       "' belongs to uid 65534, not to this user (uid 0); not "
                                       "opened");
    shmemq_destroy(q, 1);
}

// A child attaches, takes the lock through the test hook and is killed holding it. The parent's
// next operations succeed within a deadline, the queue keeps its messages, and the segment counts
// one recovery.
class ShmemqRobustTest : public ::testing::TestWithParam<Kind> {};

INSTANTIATE_TEST_SUITE_P(Kinds, ShmemqRobustTest,
                         ::testing::Values(kKinds[0], kKinds[1]),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                             return std::string(info.param.label);
                         });

TEST_P(ShmemqRobustTest, PeerKilledHoldingTheLockIsRecovered) {
    ScopedName name("ownerdead");
    shmemq_options o = options_for(GetParam());
    shmemq_t* q = shmemq_open(name.c_str(), 4, 16, &o);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    ASSERT_TRUE(enqueue_string(q, "one"));
    ASSERT_TRUE(enqueue_string(q, "two"));
    Signal locked;
    ASSERT_TRUE(locked.ok());
    Child child([&] {
        shmemq_t* mine = shmemq_open(name.c_str(), 4, 16, &o);
        if (mine == nullptr || shmemq_testing_lock(mine) != 0) return 2;
        locked.send();
        for (;;) pause();
    });
    ASSERT_TRUE(locked.read_byte(4000ms)) << "the child did not take the lock";
    child.kill_and_reap();

    std::string first;
    ASSERT_TRUE(shmemq_test::eventually([&] { return (first = dequeue_string(q)) != "<none>"; },
                                        4000ms))
        << shmemq_last_error();
    EXPECT_EQ(first, "one");
    EXPECT_EQ(shmemq_recoveries(q), 1u);
    EXPECT_EQ(dequeue_string(q), "two");
    EXPECT_EQ(dequeue_string(q), "<none>");
    EXPECT_TRUE(enqueue_string(q, "three"));
    EXPECT_EQ(dequeue_string(q), "three");
    EXPECT_EQ(shmemq_recoveries(q), 1u);
    EXPECT_EQ(u32_at(read_file(name.path()), 56), 0u) << "repairs: nothing was inconsistent";
    shmemq_destroy(q, 1);
}

// The dead holder also broke the queue: counters that cannot be (write - read > max_count) empty
// it; a queued length larger than element_size cuts the queue before that slot.
TEST_P(ShmemqRobustTest, InconsistentQueueRepairedAfterOwnerDeath) {
    ScopedName name("repair");
    shmemq_options o = options_for(GetParam());
    shmemq_t* q = shmemq_open(name.c_str(), 4, 16, &o);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    for (const char* m : {"A", "B", "C"}) ASSERT_TRUE(enqueue_string(q, m));
    {
        Signal locked;
        Child child([&] {
            // Slot 1 (message "B") starts at 320 + 1 * 24; its length field is its first 4 bytes.
            const std::uint32_t bad_len = 9999;
            const int fd = shm_open(name.c_str(), O_RDWR, 0);
            if (fd < 0 || shmemq_testing_lock(q) != 0) return 2;
            if (pwrite(fd, &bad_len, sizeof bad_len, 320 + 24) != sizeof bad_len) return 3;
            locked.send();
            for (;;) pause();
        });
        ASSERT_TRUE(locked.read_byte(4000ms));
        child.kill_and_reap();
    }
    ASSERT_TRUE(shmemq_test::eventually([&] { return shmemq_count(q) == 3u; }, 10ms));
    EXPECT_EQ(dequeue_string(q), "A");  // the lock is recovered here, the queue cut after "A"
    EXPECT_EQ(dequeue_string(q), "<none>");
    EXPECT_EQ(shmemq_recoveries(q), 1u);
    EXPECT_EQ(u32_at(read_file(name.path()), 56), 1u) << "repairs";
    {
        Signal locked;
        Child child([&] {
            if (shmemq_testing_lock(q) != 0) return 2;
            shmemq_testing_set_counts(q, 5, 500);
            locked.send();
            for (;;) pause();
        });
        ASSERT_TRUE(locked.read_byte(4000ms));
        child.kill_and_reap();
    }
    EXPECT_TRUE(enqueue_string(q, "D"));  // recovered: counters reset to read = write = 5
    EXPECT_EQ(shmemq_count(q), 1u);
    EXPECT_EQ(dequeue_string(q), "D");
    EXPECT_EQ(shmemq_recoveries(q), 2u);
    EXPECT_EQ(u32_at(read_file(name.path()), 56), 2u) << "repairs";
    shmemq_destroy(q, 1);
}

// A run crashed: the only attached process died without shmemq_destroy. The next open is refused
// with ESTALE naming the pid, unless recreate_stale, which starts an empty queue.
TEST(Shmemq, StaleSegmentOfCrashedRunDetected) {
    ScopedName name("stale");
    Child crashed([&] {
        shmemq_t* q = shmemq_new(name.c_str(), 4, 16);
        return q != nullptr && enqueue_string(q, "left over") ? 0 : 2;  // no destroy: "crash"
    });
    const pid_t pid = crashed.pid();
    ASSERT_EQ(crashed.wait(4000ms), 0);
    errno = 0;
    EXPECT_EQ(shmemq_new(name.c_str(), 4, 16), nullptr);
    EXPECT_EQ(errno, ESTALE);
    EXPECT_EQ(shmemq_last_error(), "queue '" + name.str() + "' is stale: the processes attached "
                                       "to it (pid " + std::to_string(pid) +
                                       ") died without detaching");
    shmemq_options o;
    shmemq_options_init(&o);
    o.recreate_stale = 1;
    shmemq_t* q = shmemq_open(name.c_str(), 4, 16, &o);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    EXPECT_EQ(shmemq_count(q), 0u);
    shmemq_destroy(q, 1);
}

// A queue left behind by a clean detach (destroy without unlink) is not stale: it keeps its data.
TEST(Shmemq, DestroyWithoutUnlinkKeepsQueueAndData) {
    ScopedName name("keep");
    shmemq_t* q = shmemq_new(name.c_str(), 4, 16);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    ASSERT_TRUE(enqueue_string(q, "kept"));
    shmemq_destroy(q, 0);
    struct stat st {};
    EXPECT_EQ(stat(name.path().c_str(), &st), 0) << "destroy(q, 0) must not unlink";
    q = shmemq_new(name.c_str(), 4, 16);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    EXPECT_EQ(dequeue_string(q), "kept");
    // Unlink with another handle still attached: the name goes, the memory stays for that handle.
    shmemq_t* other = shmemq_new(name.c_str(), 4, 16);
    ASSERT_NE(other, nullptr) << shmemq_last_error();
    shmemq_destroy(q, 1);
    EXPECT_EQ(stat(name.path().c_str(), &st), -1);
    EXPECT_EQ(errno, ENOENT);
    EXPECT_TRUE(enqueue_string(other, "still mapped"));
    EXPECT_EQ(dequeue_string(other), "still mapped");
    // The name is free again: a new queue of another geometry can be created under it.
    shmemq_t* fresh = shmemq_new(name.c_str(), 8, 32);
    ASSERT_NE(fresh, nullptr) << shmemq_last_error();
    EXPECT_EQ(shmemq_count(fresh), 0u);
    // `other` belongs to the unlinked queue: destroying it with unlink leaves the new one's name.
    shmemq_destroy(other, 1);
    EXPECT_EQ(stat(name.path().c_str(), &st), 0) << "destroy unlinked a successor queue";
    shmemq_destroy(fresh, 1);
    EXPECT_EQ(stat(name.path().c_str(), &st), -1);
    shmemq_destroy(nullptr, 1);  // harmless
}

// Writes a segment by hand the way a creator that died mid-way would have left it.
void write_half_initialised(const ScopedName& name, off_t size, std::uint32_t creator,
                            std::uint64_t magic = 0, std::uint32_t version = 0) {
    const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    ASSERT_EQ(fchmod(fd, 0600), 0);
    ASSERT_EQ(ftruncate(fd, size), 0);
    if (size >= 320) {
        ASSERT_EQ(pwrite(fd, &creator, sizeof creator, 48), 4);
        ASSERT_EQ(pwrite(fd, &version, sizeof version, 8), 4);
        ASSERT_EQ(pwrite(fd, &magic, sizeof magic, 0), 8);
    }
    close(fd);
}

TEST(Shmemq, HalfInitialisedSegmentDetected) {
    shmemq_options o;
    shmemq_options_init(&o);
    o.open_timeout_ms = 50;
    {
        // Creator died after sizing the segment, before publishing the magic.
        ScopedName name("halfdead");
        const pid_t dead = shmemq_test::dead_pid();
        write_half_initialised(name, 320 + 4 * 24, static_cast<std::uint32_t>(dead));
        errno = 0;
        EXPECT_EQ(shmemq_open(name.c_str(), 4, 16, &o), nullptr);
        EXPECT_EQ(errno, ESTALE);
        EXPECT_EQ(shmemq_last_error(), "queue '" + name.str() +
                                           "' is half-initialised: its creator, pid " +
                                           std::to_string(dead) + ", died before publishing it");
        o.recreate_stale = 1;
        shmemq_t* q = shmemq_open(name.c_str(), 4, 16, &o);
        ASSERT_NE(q, nullptr) << shmemq_last_error();
        EXPECT_TRUE(enqueue_string(q, "works"));
        EXPECT_EQ(dequeue_string(q), "works");
        shmemq_destroy(q, 1);
        o.recreate_stale = 0;
    }
    {
        // Creator died before ftruncate: an empty file.
        ScopedName name("halfempty");
        write_half_initialised(name, 0, 0);
        errno = 0;
        EXPECT_EQ(shmemq_open(name.c_str(), 4, 16, &o), nullptr);
        EXPECT_EQ(errno, ESTALE);
        EXPECT_NE(std::string(shmemq_last_error()).find("smaller than its header"),
                  std::string::npos) << shmemq_last_error();
    }
    {
        // Creator alive (this process) but not done within the timeout: EAGAIN, not stale.
        ScopedName name("halfslow");
        write_half_initialised(name, 320 + 4 * 24, static_cast<std::uint32_t>(getpid()));
        errno = 0;
        EXPECT_EQ(shmemq_open(name.c_str(), 4, 16, &o), nullptr);
        EXPECT_EQ(errno, EAGAIN);
        EXPECT_EQ(shmemq_last_error(), "queue '" + name.str() +
                                           "' is still being initialised by pid " +
                                           std::to_string(getpid()) + " after 50 ms");
    }
}

TEST(Shmemq, ForeignOrNewerSegmentRefused) {
    std::uint64_t magic = 0;
    std::memcpy(&magic, "DBGSHMQ", 8);
    {
        ScopedName name("badmagic");
        write_half_initialised(name, 320 + 4 * 24, 1, 0x4141414141414141ull, 1);
        errno = 0;
        EXPECT_EQ(shmemq_new(name.c_str(), 4, 16), nullptr);
        EXPECT_EQ(errno, EPROTO);
        EXPECT_EQ(shmemq_last_error(), "'" + name.str() + "' is not a shmemq queue (bad magic)");
    }
    {
        ScopedName name("version2");
        write_half_initialised(name, 320 + 4 * 24, 1, magic, 2);
        errno = 0;
        EXPECT_EQ(shmemq_new(name.c_str(), 4, 16), nullptr);
        EXPECT_EQ(errno, EPROTO);
        EXPECT_EQ(shmemq_last_error(), "queue '" + name.str() + "' has format version 2 (header "
                                       "0 bytes); this library reads version 1");
    }
}

// Four processes open one new name at the same moment: exactly one creates it, the others wait for
// its magic and attach; every process's message arrives. Twenty rounds, each with a fresh name.
TEST(Shmemq, SimultaneousOpenersAgreeOnOneQueue) {
    constexpr int kProcesses = 4;
    for (int round = 0; round < 20; ++round) {
        ScopedName name("race");
        Signal go;
        std::vector<std::unique_ptr<Child>> children;
        for (int p = 0; p < kProcesses; ++p) {
            children.push_back(std::make_unique<Child>([&, p] {
                if (!go.read_byte(4000ms)) return 2;
                shmemq_t* q = shmemq_new(name.c_str(), 8, 16);
                if (q == nullptr) return 3;
                const std::string m = "p" + std::to_string(p);
                const bool ok = enqueue_string(q, m);
                shmemq_destroy(q, 0);
                return ok ? 0 : 4;
            }));
        }
        for (int p = 0; p < kProcesses; ++p) go.send();
        for (auto& c : children) ASSERT_EQ(c->wait(4000ms), 0) << "round " << round;
        shmemq_t* q = shmemq_new(name.c_str(), 8, 16);
        ASSERT_NE(q, nullptr) << shmemq_last_error();
        std::set<std::string> got;
        for (int p = 0; p < kProcesses; ++p) got.insert(dequeue_string(q));
        EXPECT_EQ(got, (std::set<std::string>{"p0", "p1", "p2", "p3"})) << "round " << round;
        EXPECT_EQ(shmemq_count(q), 0u);
        shmemq_destroy(q, 1);
    }
}

TEST(Shmemq, AttachTableRecordsAndClearsPids) {
    ScopedName name("attach");
    shmemq_t* a = shmemq_new(name.c_str(), 1, 8);
    ASSERT_NE(a, nullptr) << shmemq_last_error();
    shmemq_t* b = shmemq_new(name.c_str(), 1, 8);
    ASSERT_NE(b, nullptr) << shmemq_last_error();
    std::vector<unsigned char> bytes = read_file(name.path());
    const auto self = static_cast<std::uint32_t>(getpid());
    EXPECT_EQ(u32_at(bytes, 48), self) << "creator_pid";
    EXPECT_EQ(u32_at(bytes, 64), self) << "attached[0]";
    EXPECT_EQ(u32_at(bytes, 68), self) << "attached[1]";
    EXPECT_EQ(u32_at(bytes, 72), 0u) << "attached[2]";
    shmemq_destroy(a, 0);
    bytes = read_file(name.path());
    EXPECT_EQ(u32_at(bytes, 64), 0u) << "attached[0] after destroy";
    EXPECT_EQ(u32_at(bytes, 68), self) << "attached[1]";
    shmemq_destroy(b, 1);
}

TEST(Shmemq, StatsAreNotCountedInThePlainLibrary) {
    EXPECT_FALSE(shmemq_stats_enabled());
    ScopedName name("nostats");
    shmemq_t* q = shmemq_new(name.c_str(), 1, 8);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    EXPECT_TRUE(enqueue_string(q, "x"));
    EXPECT_FALSE(enqueue_string(q, "y"));
    shmemq_stats st;
    shmemq_stats_get(&st);
    EXPECT_EQ(st.acquisitions, 0u);
    EXPECT_EQ(st.full, 0u);
    shmemq_destroy(q, 1);
}

TEST(Shmemq, LockKindNames) {
    EXPECT_EQ(shmemq_lock_kind_from_name("normal"), SHMEMQ_LOCK_NORMAL);
    EXPECT_EQ(shmemq_lock_kind_from_name("adaptive"), SHMEMQ_LOCK_ADAPTIVE);
    EXPECT_EQ(shmemq_lock_kind_from_name("lockfree"), SHMEMQ_LOCK_LOCKFREE);
    EXPECT_EQ(shmemq_lock_kind_from_name("Normal"), -1);
    EXPECT_EQ(shmemq_lock_kind_from_name(nullptr), -1);
    EXPECT_STREQ(shmemq_lock_kind_name(SHMEMQ_LOCK_ADAPTIVE), "adaptive");
}

// ---- The worked example of docs/shmemq-format.md is a fixture ----

// Bytes the spec shows as "..": creator_pid (48-51), the attached pids (64-95) and the mutex
// field (128-191), whose contents are glibc's, not the format's.
bool masked(std::size_t offset) {
    return (offset >= 48 && offset < 52) || (offset >= 64 && offset < 96) ||
           (offset >= 128 && offset < 192);
}

std::string hexdump(const std::vector<unsigned char>& bytes) {
    std::ostringstream out;
    for (std::size_t row = 0; row < bytes.size(); row += 16) {
        char offset[32];
        std::snprintf(offset, sizeof offset, "%04zx:", row);
        out << offset;
        for (std::size_t i = row; i < row + 16 && i < bytes.size(); ++i) {
            char cell[8];
            std::snprintf(cell, sizeof cell, " %02x", bytes[i]);
            out << (masked(i) ? " .." : cell);
        }
        out << "\n";
    }
    return out.str();
}

// A dump row "OFFS: c0 c1 ... c15", cells two lowercase hex digits or "..", OFFS the count of cells
// before it. (No std::regex: GCC 12 warns inside <regex> under -fsanitize=address.)
bool parse_row(const std::string& line, std::size_t expected_offset,
               std::vector<std::string>& cells) {
    const auto is_hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
    if (line.size() != 5 + 16 * 3 || line[4] != ':') return false;
    for (int i = 0; i < 4; ++i) {
        if (!is_hex(line[static_cast<std::size_t>(i)])) return false;
    }
    if (std::stoul(line.substr(0, 4), nullptr, 16) != expected_offset) return false;
    for (std::size_t pos = 5; pos < line.size(); pos += 3) {
        const std::string cell = line.substr(pos + 1, 2);
        if (line[pos] != ' ' || !(cell == ".." || (is_hex(cell[0]) && is_hex(cell[1])))) {
            return false;
        }
        cells.push_back(cell);
    }
    return true;
}

TEST(ShmemqFormat, WorkedExampleMatchesTheLibrary) {
    std::ifstream md(SHMEMQ_FORMAT_MD);
    ASSERT_TRUE(md) << "cannot read " << SHMEMQ_FORMAT_MD;
    const std::string text((std::istreambuf_iterator<char>(md)), {});
    const std::string start = "<!-- shmemq-format:example:start -->";
    const std::string end = "<!-- shmemq-format:example:end -->";
    const std::size_t a = text.find(start);
    const std::size_t b = text.find(end);
    ASSERT_NE(a, std::string::npos) << "no " << start << " in " << SHMEMQ_FORMAT_MD;
    ASSERT_NE(b, std::string::npos) << "no " << end << " in " << SHMEMQ_FORMAT_MD;
    // Each row: "OFFS: xx xx ..." with 16 cells, ".." for a masked byte.
    std::vector<std::string> doc_cells;
    std::istringstream rows(text.substr(a + start.size(), b - a - start.size()));
    std::string line;
    while (std::getline(rows, line)) {
        std::vector<std::string> cells;
        if (!parse_row(line, doc_cells.size(), cells)) continue;  // the code fence, blank lines
        doc_cells.insert(doc_cells.end(), cells.begin(), cells.end());
    }
    ASSERT_FALSE(doc_cells.empty()) << "no dump rows between the markers";

    // The operations the spec lists above the dump.
    ScopedName name("format");
    shmemq_t* q = shmemq_new(name.c_str(), 4, 8);
    ASSERT_NE(q, nullptr) << shmemq_last_error();
    ASSERT_TRUE(enqueue_string(q, "hello"));
    ASSERT_TRUE(enqueue_string(q, "dbgkit!!"));
    ASSERT_TRUE(enqueue_string(q, ""));
    ASSERT_EQ(dequeue_string(q), "hello");
    const std::vector<unsigned char> bytes = read_file(name.path());
    shmemq_destroy(q, 1);

    ASSERT_EQ(doc_cells.size(), bytes.size()) << "the library's segment:\n" << hexdump(bytes);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        char want[4];
        std::snprintf(want, sizeof want, "%02x", bytes[i]);
        EXPECT_EQ(doc_cells[i], masked(i) ? ".." : want)
            << "offset " << i << "; the library's segment:\n" << hexdump(bytes);
        if (doc_cells[i] != (masked(i) ? ".." : want)) break;
    }
}

}  // namespace
}  // namespace dbgkit::targets
