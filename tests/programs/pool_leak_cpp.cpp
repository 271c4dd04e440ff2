// A typed object pool (C++) that reports its objects with memdump_api.h: one leaked object, at
// the MEMDUMP_ALLOC of Pool::make; the others go back to the pool; the pool's superblock (a
// new[]'d array) is not reported while it holds a live object.
#include <cstddef>
#include <cstring>
#include <new>

#include <memdump_api.h>

namespace {

struct Node {
    long key;
    long value[4];
};

class Pool {
public:
    explicit Pool(std::size_t count) : slots_(new Slot[count]) {
        for (std::size_t i = count; i-- > 0;) {
            slots_[i].next = free_;
            free_ = &slots_[i];
        }
    }
    Pool(const Pool &) = delete;
    Pool &operator=(const Pool &) = delete;

    Node *make(long key) {
        Slot *slot = free_;
        free_ = slot->next;
        Node *node = new (slot->storage) Node{key, {0, 0, 0, 0}};
        MEMDUMP_ALLOC(node, sizeof(Node));  // LEAK: pool_node
        return node;
    }

    void destroy(Node *node) {
        node->~Node();
        MEMDUMP_FREE(node);
        Slot *slot = reinterpret_cast<Slot *>(node);
        slot->next = free_;
        free_ = slot;
    }

private:
    union Slot {
        Slot *next;
        alignas(Node) unsigned char storage[sizeof(Node)];
    };
    Slot *slots_;
    Slot *free_ = nullptr;
};

Pool pool(6);  // lives on: its superblock, reachable, holds a live object and is not reported

// No stale copy of the leaked pointer may survive in the stack above the stack pointer at exit.
__attribute__((noinline)) void scrub() {
    volatile char pad[16384];
    std::memset(const_cast<char *>(pad), 0, sizeof pad);
    __asm__ volatile("" : : "r"(pad) : "memory");  /* kept at -O2 */
}

}  // namespace

int main() {
    Node *a = pool.make(1);
    Node *leaked = pool.make(2);
    Node *c = pool.make(3);
    leaked->value[0] = leaked->key;  // used, then forgotten
    leaked = nullptr;
    pool.destroy(c);
    pool.destroy(a);
    scrub();
    return 0;
}
