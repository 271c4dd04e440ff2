// @brief The targets' types in known states, for the pretty-printer tests (tests/e2e/test_printers.py).
//
// At the line marked BREAK the test prints every expression that has a comment "PRINTS: EXPR =
// TEXT" and compares GDB's output with TEXT exactly, except that `<addr>` stands for any hex
// address and `<pid>` for this process's id. The comment goes on the line where the variable is
// declared or last changed; expectations never name a line number.
// It is linked with the dbgkit printers' .debug_gdb_scripts entry (the auto-load test).
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mpmc_queue.hpp"
#include "object_pool.hpp"
#include "producer_consumer.hpp"
#include "shmemq.h"
#include "shmemq_testing.h"
#include "spsc_ring.hpp"

using namespace dbgkit::targets;

namespace {

/// Overwrites the first index of an AtomicRing with AdjacentIndices (head, at offset 0), as a
/// stray write would: the printer must say so, not print slots that do not exist.
template <typename Ring>
void corrupt_head(Ring& ring, std::size_t head) {
    reinterpret_cast<std::atomic<std::size_t>*>(&ring)->store(head);
}

}  // namespace

int main() {
    LockedRing<int> locked(4);
    for (int v : {1, 2, 3}) {
        locked.try_push(v);
    }
    int out = 0;
    locked.try_pop(out);  // PRINTS: locked = dbgkit::targets::LockedRing<int> of size 2, capacity 4, head 3, tail 1, unlocked = {2, 3}

    SeqCstRing<unsigned long> wrapped(5);
    unsigned long value = 0;
    for (unsigned long v = 10; v < 15; ++v) {
        wrapped.try_push(v);
    }
    for (int i = 0; i < 4; ++i) {
        wrapped.try_pop(value);
    }
    wrapped.try_push(15);
    wrapped.try_push(16);  // PRINTS: wrapped = dbgkit::targets::SeqCstRing<unsigned long> of size 3, capacity 5, head 1, tail 4 = {14, 15, 16}

    AcqRelRing<int> empty_ring(3);  // PRINTS: empty_ring = dbgkit::targets::AcqRelRing<int> of size 0, capacity 3, head 0, tail 0

    SeqCstRing<int> corrupt_ring(8);
    corrupt_head(corrupt_ring, 9);  // PRINTS: corrupt_ring = dbgkit::targets::SeqCstRing<int> of capacity 8, head 9, tail 0 <corrupt: head 9 > capacity 8>

    CoarseQueue<std::string> coarse;
    coarse.push("one");
    coarse.push("two");
    coarse.close();  // PRINTS: coarse = dbgkit::targets::CoarseQueue<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > > of length 2, closed, unlocked = {"one", "two"}

    std::vector<int> many(200);
    CoarseQueue<int> long_queue;
    for (int i = 0; i < 700; ++i) {
        long_queue.push(i);  // fills more than one deque node (128 ints each)
    }
    std::optional<int> popped = long_queue.pop();  // PRINTS: long_queue = dbgkit::targets::CoarseQueue<int> of length 699, open, unlocked = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127, 128, 129, 130, 131, 132, 133, 134, 135, 136, 137, 138, 139, 140, 141, 142, 143, 144, 145, 146, 147, 148, 149, 150, 151, 152, 153, 154, 155, 156, 157, 158, 159, 160, 161, 162, 163, 164, 165, 166, 167, 168, 169, 170, 171, 172, 173, 174, 175, 176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191, 192, 193, 194, 195, 196, 197, 198, 199, 200...}

    FineQueue<int> fine;
    for (int v : {7, 8, 9}) {
        fine.push(v);
    }
    std::optional<int> first = fine.pop();  // PRINTS: fine = dbgkit::targets::FineQueue<int> of length 2, open, 0 waiting, head lock unlocked, tail lock unlocked = {8, 9}

    FineQueue<int> empty_fine;  // PRINTS: empty_fine = dbgkit::targets::FineQueue<int> of length 0, open, 0 waiting, head lock unlocked, tail lock unlocked

    PcConfig config;
    config.threads = 3;
    config.items = 10;
    detail::PcRun run(PcVariant::condvar, config);  // PRINTS: run = condvar run of 3 threads, running: produced 3 of 10, consumed 0, queue of length 3, unlocked = {0, 1, 2}

    NewDeletePool plain(24);
    void* a = plain.acquire();
    void* b = plain.acquire();  // PRINTS: plain = dbgkit::targets::NewDeletePool of 24-byte blocks, 2 out

    MutexPool mutex_pool(40);
    std::vector<void*> blocks;
    for (int i = 0; i < 3; ++i) {
        blocks.push_back(mutex_pool.acquire());
    }
    mutex_pool.release(blocks.back());  // PRINTS: mutex_pool = dbgkit::targets::MutexPool of 40-byte blocks: 3 owned, 1 free, 2 out, unlocked

    SegmentLinearPool linear(24);
    std::vector<void*> linear_blocks;
    for (int i = 0; i < 70; ++i) {
        linear_blocks.push_back(linear.acquire());
    }
    linear.release(linear_blocks[3]);  // PRINTS: linear = dbgkit::targets::SegmentLinearPool of 24-byte blocks: 2 segments, 128 owned, 59 free, 69 out = {[0] = 63 of 64 blocks out, stride 48, storage <addr>, free bitmap 0x0000000000000008, [1] = 6 of 64 blocks out, stride 48, storage <addr>, free bitmap 0xffffffffffffffc0}

    SegmentTreePool tree(8, TreeChoice::best_child);
    std::vector<void*> tree_blocks;
    for (int i = 0; i < 129; ++i) {
        tree_blocks.push_back(tree.acquire());
    }
    tree_blocks.push_back(tree.acquire());  // PRINTS: tree = dbgkit::targets::SegmentTreePool of 8-byte blocks (best_child): 3 segments, 192 owned, 62 free, 130 out = {root = 64 of 64 blocks out, stride 32, storage <addr>, free bitmap 0x0000000000000000, root.0 = 64 of 64 blocks out, stride 32, storage <addr>, free bitmap 0x0000000000000000, root.1 = 2 of 64 blocks out, stride 32, storage <addr>, free bitmap 0xfffffffffffffffc}

    const std::string name = "/dbgkit-printers-" + std::to_string(getpid());
    shmemq_t* queue = shmemq_new(name.c_str(), 8, 64);
    char message[64] = "hello";
    for (int i = 0; i < 3; ++i) {
        shmemq_try_enqueue(queue, message, 6);
    }
    shmemq_try_dequeue(queue, message, sizeof message);
    shmemq_testing_lock(queue);  // PRINTS: *queue = shmemq_t "/dbgkit-printers-<pid>", normal robust, mapped at <addr> (896 bytes), attached as #0 (pid <pid>) = {hdr = shmemq v1: 8 slots of 64 bytes (slot 72, segment 896 bytes), normal robust lock locked by LWP <pid>, 2 queued (written 3, read 1), creator <pid>, attached [<pid>], recoveries 0, repairs 0}

    // Found through a typedef of the typedef the printer is registered for (the struct's tag,
    // _shmemq, is not).
    typedef shmemq_t queue_handle;
    queue_handle* aliased = queue;
    (void)aliased;  // PRINTS: *aliased = shmemq_t "/dbgkit-printers-<pid>", normal robust, mapped at <addr> (896 bytes), attached as #0 (pid <pid>) = {hdr = shmemq v1: 8 slots of 64 bytes (slot 72, segment 896 bytes), normal robust lock locked by LWP <pid>, 2 queued (written 3, read 1), creator <pid>, attached [<pid>], recoveries 0, repairs 0}

    shmemq_options options;
    shmemq_options_init(&options);
    options.lock = SHMEMQ_LOCK_ADAPTIVE;
    options.robust = 0;
    shmemq_t* adaptive = shmemq_open((name + "-adaptive").c_str(), 2, 8, &options);
    shmemq_try_enqueue(adaptive, message, 8);
    shmemq_try_enqueue(adaptive, message, 8);  // PRINTS: *adaptive->hdr = shmemq v1: 2 slots of 8 bytes (slot 16, segment 352 bytes), adaptive lock unlocked, spin estimate 0, 2 queued (written 2, read 0), creator <pid>, attached [<pid>], recoveries 0, repairs 0

    const std::string broken_name = name + "-broken";
    options.lock = SHMEMQ_LOCK_LOCKFREE;
    shmemq_t* broken = shmemq_open(broken_name.c_str(), 4, 16, &options);
    shmemq_testing_set_counts(broken, 5, 3);  // PRINTS: *broken = shmemq_t "/dbgkit-printers-<pid>-broken", lockfree, mapped at <addr> (416 bytes), attached as #0 (pid <pid>) = {hdr = shmemq v1: 4 slots of 16 bytes (slot 24, segment 416 bytes), lockfree, <corrupt: read_count 5 > write_count 3> (written 3, read 5), creator <pid>, attached [<pid>], recoveries 0, repairs 0}

    // Memory as it is before a constructor runs (zeros), and a shmemq header whose creator has
    // stored its pid (offset 48) but not yet the magic.
    alignas(64) unsigned char zeros[2048] = {};
    alignas(64) unsigned char creating[320] = {};
    const unsigned int creator = 4242;
    std::memcpy(creating + 48, &creator, sizeof creator);
    (void)zeros;  // PRINTS: *(dbgkit::targets::LockedRing<int>*)zeros = dbgkit::targets::LockedRing<int> of capacity 0, head 0, tail 0, unlocked <corrupt: no slots (not constructed)>
    (void)zeros;  // PRINTS: *(dbgkit::targets::CoarseQueue<int>*)zeros = <corrupt: deque with no map (not constructed)>
    (void)zeros;  // PRINTS: *(dbgkit::targets::SegmentLinearPool*)zeros = <corrupt: segment at <addr> has no storage (not constructed)>
    (void)zeros;  // PRINTS: *(dbgkit::targets::SegmentTreePool*)zeros = <corrupt: segment at <addr> has no storage (not constructed)>
    (void)zeros;  // PRINTS: *(dbgkit::targets::detail::PcRun*)zeros = <corrupt: deque with no map (not constructed)>
    (void)zeros;  // PRINTS: *(dbgkit::targets::FineQueue<int>*)zeros = <corrupt: no dummy node (head_ is null)>
    (void)zeros;  // PRINTS: *(typeof(queue->hdr))zeros = <corrupt: bad magic 0x0>
    (void)creating;  // PRINTS: *(typeof(queue->hdr))creating = <corrupt: being initialised by pid 4242>
    (void)queue;  // PRINTS: *queue->hdr = shmemq v1: 8 slots of 64 bytes (slot 72, segment 896 bytes), normal robust lock locked by LWP <pid>, 2 queued (written 3, read 1), creator <pid>, attached [<pid>], recoveries 0, repairs 0

    // Noise (a fixed pseudo-random sequence) that the robustness test prints as every type.
    alignas(64) static unsigned char noise[4096];
    std::uint32_t state = 12345;
    for (unsigned char& byte : noise) {
        state = state * 1103515245u + 12345u;
        byte = static_cast<unsigned char>(state >> 16);
    }

    std::puts("printers: ready");  // BREAK: printers

    shmemq_testing_unlock(queue);
    shmemq_destroy(broken, 1);
    shmemq_destroy(adaptive, 1);
    shmemq_destroy(queue, 1);
    plain.release(a);
    plain.release(b);
    for (void* block : blocks) {
        if (block != blocks.back()) {
            mutex_pool.release(block);
        }
    }
    std::printf("%d %lu %d %d %zu\n", out, value, popped.value_or(-1), first.value_or(-1),
                many.size());
    return 0;
}
