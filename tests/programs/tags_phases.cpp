// @brief memdump_api.h's tags and phases: a scope per subsystem, a nested one, another thread's
// tag, two phases. Each tag's blocks have a size of their own (the tests attribute by size).
#include <cstdlib>
#include <cstring>
#include <thread>

#include "memdump_api.h"

namespace {

struct Blocks {
    void *at[8];
    int n = 0;
    void take(size_t size)
    {
        at[n] = malloc(size);  // BREAK: take
        memset(at[n], 1, size);
        n++;
    }
    void release()
    {
        while (n)  // BREAK: loop
            free(at[--n]);  // BREAK: release
    }
};

}  // namespace

int main()
{
    Blocks main_blocks, audio_blocks;
    MEMDUMP_PHASE("level 1");
    main_blocks.take(11);  // untagged
    {
        MEMDUMP_TAG_SCOPE("physics");
        main_blocks.take(1001);
        main_blocks.take(1001);
        {
            MEMDUMP_TAG_SCOPE("collision");
            main_blocks.take(1002);  // BREAK: collision
        }
        main_blocks.take(1001);
    }
    std::thread audio([&audio_blocks] {
        memdump_tag_push("audio");
        audio_blocks.take(2001);
        audio_blocks.take(2001);  // BREAK: audio2
        memdump_tag_pop();
        audio_blocks.take(12);  // untagged
    });
    audio.join();
    MEMDUMP_PHASE("level 2");  // BREAK: level2
    main_blocks.take(3001);  // untagged, in level 2
    audio_blocks.release();
    main_blocks.release();
    return 0;
}
