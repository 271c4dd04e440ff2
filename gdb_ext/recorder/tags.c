/* @brief The names of memdump_api.h's tags, interned as the dump's strings (`s ID TEXT`).
 *
 * A tag is named each time a scope is entered, often by the same literal: the name is looked up
 * by its text (a copy is kept: the caller's string may be a buffer it reuses) in an open
 * addressing table of the recorder's own memory, and its `s` record is written the first time.
 * Names are cut at MDR_TAG_MAX bytes. Called under the writer lock. */
#include <string.h>

#include "control.h"
#include "recorder.h"

#define SLOTS_MIN 256
#define ARENA (64u << 10)

struct tag { uint64_t hash, id; char *text; };

static struct tag *tags;
static size_t tags_cap, tags_used;

static uint64_t hash_of(const char *s, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h | 1; /* 0: a free slot */
}

static struct tag *slot_of(struct tag *table, size_t cap, uint64_t hash, const char *s, size_t len)
{
    for (size_t i = hash & (cap - 1);; i = (i + 1) & (cap - 1)) {
        struct tag *t = &table[i];
        if (!t->hash || (t->hash == hash && strncmp(t->text, s, len) == 0 && !t->text[len]))
            return t;
    }
}

static int grow(void)
{
    size_t cap = tags_cap ? 2 * tags_cap : SLOTS_MIN;
    struct tag *table = mdr_map(cap * sizeof *table); /* zero: fresh pages */
    if (table == NULL)
        return 0;
    for (size_t i = 0; i < tags_cap; i++)
        if (tags[i].hash)
            *slot_of(table, cap, tags[i].hash, tags[i].text, strlen(tags[i].text)) = tags[i];
    mdr_unmap(tags, tags_cap * sizeof *tags);
    tags = table;
    tags_cap = cap;
    return 1;
}

/* LEN bytes for a name's copy, from pieces of ARENA bytes */
static char *text_space(size_t len)
{
    static char *arena;
    static size_t left;
    if (len > left) {
        arena = mdr_map(ARENA);
        left = arena ? ARENA : 0;
        if (len > left)
            return NULL;
    }
    left -= len;
    return (arena += len) - len;
}

/* The string id of NAME, its `s` record written the first time (0: the empty name, as GDB's
 * writer has it); MDR_NO_TAG when out of memory or space */
MDR_HIDDEN uint64_t mdr_tag_string(const char *name)
{
    size_t len = strnlen(name, MDR_TAG_MAX);
    if (len == 0)
        return 0;
    uint64_t hash = hash_of(name, len);
    if (2 * (tags_used + 1) > tags_cap && !grow())
        return MDR_NO_TAG;
    struct tag *t = slot_of(tags, tags_cap, hash, name, len);
    if (t->hash)
        return t->id;
    char *text = text_space(len + 1);
    char *p = mdr_out_reserve(2 * len + 32);
    if (text == NULL || p == NULL)
        return MDR_NO_TAG;
    memcpy(text, name, len);
    text[len] = '\0';
    uint64_t id = memdump_recorder_control.next_string++;
    char *start = p;
    *p++ = MEMDUMP_TAG_S_CHAR;
    *p++ = ' ';
    p = mdr_fmt_dec(p, id);
    *p++ = ' ';
    p = mdr_fmt_str(p, text);
    *p++ = '\n';
    mdr_out_commit((size_t)(p - start));
    *t = (struct tag){hash, id, text};
    tags_used++;
    return id;
}

/* A new recording (a process recorded again): its dump defines the strings anew */
MDR_HIDDEN void mdr_tags_reset(void)
{
    mdr_unmap(tags, tags_cap * sizeof *tags);
    tags = NULL;
    tags_cap = tags_used = 0;
}
