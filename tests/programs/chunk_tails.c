/* @brief Lost blocks whose last 8 bytes hold the next chunk's header, as glibc lays out a block
 * of 24, 40, 56 ... bytes: the C library's own words that point at that header (its bins, its top,
 * the fd/bk words left in recycled memory, such as the stdio buffer allocated later) must not make
 * the lost block possibly lost, where a program's interior pointer into it still must. One case
 * each (argv[1]): game, game-thread, game-note, interior.
 *
 * game: a level of 100 entities of 56 bytes (64-byte chunks, one run), a score board after them;
 * entities die and respawn for 30 frames; in frame 17 the entity of slot 80 is forgotten (its only
 * pointer replaced by its respawn's); at the level's end the others are freed in slot order. The
 * first printf then asks for stdio's 4,096-byte buffer: glibc's malloc_consolidate merges the
 * freed chunks, and every chunk below the lost one gets, in its first word, the address of the
 * free chunk right above it (the unsorted bin's first, 48 bytes into the lost block); the buffer
 * is carved from that run, 63 such words in it (glibc 2.36). valgrind: 56 bytes definitely lost.
 * game-thread: the same level in a thread (its own arena), whose 4,096-byte log is carved from the
 * freed run likewise and kept. game-note: the level, then a 4,096-byte note carved from the run
 * and lost too: two blocks definitely lost, neither found from the other. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENTITIES 100
#define FRAMES 30
#define FORGOTTEN_SLOT 80
#define FORGOTTEN_FRAME 17

/* 56 bytes: glibc gives it a 64-byte chunk whose last 8 bytes are the next chunk's header */
struct entity {
    double x, y, vx, vy;
    int id, hp;
    struct entity *target;
    long score;
};

static struct entity *slots[ENTITIES];
static char *board;
static char *interior;
static char *log_text;
static long total_score;

/* Overwrite the stack the level used, and the registers it left pointers in. */
__attribute__((noinline)) static void scrub(void) {
    volatile char pad[16384];
    memset((char *)pad, 0, sizeof pad);
}

__attribute__((noinline)) static struct entity *spawn(int id) {
    struct entity *e = malloc(sizeof *e);  // LEAK: entity
    memset(e, 0, sizeof *e);
    e->id = id;
    e->hp = 1 + id % 4;
    e->vx = (id % 7) - 3;
    e->vy = (id % 3) - 1;
    return e;
}

__attribute__((noinline)) static void level(void) {
    for (int i = 0; i < ENTITIES; i++)
        slots[i] = spawn(i);
    board = malloc(200);
    for (int frame = 0; frame < FRAMES; frame++) {
        for (int i = 0; i < ENTITIES; i++) {
            struct entity *e = slots[i];
            e->x += e->vx;
            e->y += e->vy;
            if ((frame + i) % 3 == 0)
                e->hp--;
            if (frame == FORGOTTEN_FRAME && i == FORGOTTEN_SLOT) {
                slots[i] = spawn(i);  // the bug: the old entity is neither freed nor kept
                continue;
            }
            if (e->hp <= 0) {
                total_score += e->score + e->id;
                free(e);
                slots[i] = spawn(i + ENTITIES * frame);
            }
        }
    }
    for (int i = 0; i < ENTITIES; i++) {
        free(slots[i]);
        slots[i] = NULL;
    }
}

static void *level_thread(void *arg) {
    (void)arg;
    level();
    scrub();
    /* the thread's log, from its arena's recycled chunks: kept (still reachable), only its first
     * bytes written */
    log_text = malloc(4096);  // LEAK: log
    snprintf(log_text, 4096, "score %ld", total_score);
    return NULL;
}

/* A note made of the level's freed chunks, lost: glibc's words in it lead to no other block. */
__attribute__((noinline)) static void lost_note(void) {
    char *note = malloc(4096);  // LEAK: note
    snprintf(note, 4096, "score %ld", total_score);
}

/* A genuine interior pointer into a 56-byte block, to its last field but one: possibly lost. */
__attribute__((noinline)) static void case_interior(void) {
    struct entity *e = spawn(1);
    interior = (char *)&e->target;  // 40 bytes in
}

int main(int argc, char **argv) {
    const char *which = argc > 1 ? argv[1] : "game";
    if (strcmp(which, "game") == 0) {
        level();
    } else if (strcmp(which, "game-thread") == 0) {
        pthread_t t;
        pthread_create(&t, NULL, level_thread, NULL);
        pthread_join(t, NULL);
    } else if (strcmp(which, "game-note") == 0) {
        level();
        lost_note();
    } else if (strcmp(which, "interior") == 0) {
        case_interior();
    } else {
        fprintf(stderr, "unknown case %s\n", which);
        return 2;
    }
    scrub();
    /* stdout's buffer (4,096 bytes) is allocated now, from the chunks the level freed */
    printf("score %ld\n", total_score);
    for (int i = 0; i < 100; i++)
        printf("line %d of the summary\n", i);
    free(board);  // BREAK: summary-printed
    return 0;
}
