/* @brief libmemdump_core: `--format pprof`'s samples (exports/pprof.py's `_Builder.build`, whose
 * encoding this keeps byte for byte, Python's loop being the reference and the fallback). The
 * stacks' frames come numbered: most rows as the library's stack rows (their frames' entries,
 * copied from its flat table), the others by Python; the library cuts each stack into its
 * locations (a run of frames at one program counter: the frames whose code was inlined, then the
 * frame they were inlined into), numbers the distinct runs as Python meets them, and, once Python
 * has made each run's location, writes the sample messages. Memory: 16 bytes a frame of a stack,
 * a few tables of the distinct frames and runs. */
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "figures.h"

/* The frames of the profile's rows, numbered, into ix[0..off[n_rows]) (room: `room`), row r's
 * being ix[off[r]..off[r+1]): when sel[r] >= 0, the library's stack row sel[r] of n_ends
 * (nativegroups.py's StackRows: its frames' entries index[ends[sel[r]]..ends[sel[r]+1])), else
 * the next of the rows Python numbered, ext[ext_ends[k]..ext_ends[k+1]) for the k-th of them.
 * Returns off[n_rows], or -1 when a row is not there or the room is too small. */
EXPORT int64_t mdc_pprof_gather(const int32_t *index, const int64_t *ends, uint64_t n_ends,
                                const int64_t *sel, uint64_t n_rows, const int32_t *ext,
                                const int64_t *ext_ends, int32_t *ix, int64_t *off,
                                uint64_t room)
{
    uint64_t at = 0, k = 0;
    off[0] = 0;
    for (uint64_t r = 0; r < n_rows; r++) {
        const int32_t *from;
        uint64_t n;
        if (sel[r] >= 0) {
            if ((uint64_t)sel[r] >= n_ends)
                return -1;
            from = index + ends[sel[r]];
            n = (uint64_t)(ends[sel[r] + 1] - ends[sel[r]]);
        } else {
            from = ext + ext_ends[k];
            n = (uint64_t)(ext_ends[k + 1] - ext_ends[k]);
            k++;
        }
        if (n > room - at)
            return -1;
        memcpy(ix + at, from, n * sizeof *ix);
        at += n;
        off[r + 1] = (int64_t)at;
    }
    return (int64_t)at;
}

/* The locations of the stacks: row r's frames are ix[off[r]..off[r+1]) (mdc_pprof_gather's
 * numbers), inlined[k] says whether frame k's code was inlined. A run is the frames up to the
 * first one not inlined (or the stack's end); runs[0..*n_runs) the run of each location of
 * each row, row r's being runs[run_off[r]..run_off[r+1]) (room: off[n_rows] and n_rows + 1);
 * each distinct run, numbered as met, is its frames' numbers run_frames[run_at[k]..run_at[k+1])
 * (room: `room` and room + 1; off[n_rows] is always enough, the distinct runs are far fewer).
 * Returns the number of distinct runs, -1 when out of memory, -2 when the room is too small. */
EXPORT int64_t mdc_pprof_runs(const int32_t *ix, const int64_t *off, uint64_t n_rows,
                              const uint8_t *inlined, int32_t *runs, int64_t *run_off,
                              int32_t *run_frames, int64_t *run_at, uint64_t room)
{
    /* a run is interned as a list of cells (frame, the run before it), its id the last cell's */
    struct counter cells = {0}, distinct = {0};
    uint64_t got = 0, n_frames_out = 0;
    int ok = 1, short_of_room = 0;
    run_off[0] = 0;
    run_at[0] = 0;
    for (uint64_t r = 0; ok && r < n_rows; r++) {
        int64_t list = -1, start = -1;
        for (int64_t i = off[r]; ok && i < off[r + 1]; i++) {
            if (list < 0)
                start = i;
            int64_t *cell = counter_at(&cells, ix[i], list);
            ok = cell != NULL;
            if (!ok)
                break;
            list = (int64_t)(((char *)cell - (char *)cells.e) / (int64_t)sizeof *cells.e);
            if (inlined[ix[i]] && i + 1 < off[r + 1])
                continue;
            /* the run ends here: its number, a new one's frames kept */
            uint64_t before = distinct.n;
            int64_t *d = counter_at(&distinct, list, 0);
            ok = d != NULL;
            if (!ok)
                break;
            int64_t id = (int64_t)(((char *)d - (char *)distinct.e) / (int64_t)sizeof *distinct.e);
            if (distinct.n != before) {
                if (distinct.n > room || (uint64_t)(i - start + 1) > room - n_frames_out) {
                    ok = 0;
                    short_of_room = 1;
                    break;
                }
                for (int64_t j = start; j <= i; j++)
                    run_frames[n_frames_out++] = ix[j];
                run_at[distinct.n] = (int64_t)n_frames_out;
            }
            runs[got++] = (int32_t)id;
            list = -1;
        }
        run_off[r + 1] = (int64_t)got;
    }
    int64_t n = (int64_t)distinct.n;
    counter_free(&cells);
    counter_free(&distinct);
    return ok ? n : short_of_room ? -2 : -1;
}

static uint64_t varint(uint8_t *out, uint64_t v)
{
    uint64_t n = 0;
    while (v > 0x7F) {
        out[n++] = (uint8_t)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

static uint64_t varint_len(uint64_t v)
{
    uint64_t n = 1;
    while (v > 0x7F) {
        v >>= 7;
        n++;
    }
    return n;
}

/* The Sample messages (profile.proto's field 2 of Profile), row after row, into out (room:
 * n_rows * 80 + 10 * runs): row r's locations are loc[runs[run_off[r]..run_off[r+1])] (loc:
 * each run's location id), its values values[4r..4r+4) (a negative one as its two's
 * complement). Returns the bytes written. */
EXPORT uint64_t mdc_pprof_samples(const int32_t *runs, const int64_t *run_off, uint64_t n_rows,
                                  const int64_t *loc, const int64_t *values, uint8_t *out)
{
    uint64_t at = 0;
    for (uint64_t r = 0; r < n_rows; r++) {
        uint64_t ids = 0, vals = 0;
        for (int64_t i = run_off[r]; i < run_off[r + 1]; i++)
            ids += varint_len((uint64_t)loc[runs[i]]);
        for (int j = 0; j < 4; j++)
            vals += varint_len((uint64_t)values[4 * r + (uint64_t)j]);
        /* location_id = 1 (packed, left out when empty), value = 2 (packed) */
        uint64_t body = (ids ? 1 + varint_len(ids) + ids : 0) + 1 + varint_len(vals) + vals;
        out[at++] = 2 << 3 | 2;
        at += varint(out + at, body);
        if (ids) {
            out[at++] = 1 << 3 | 2;
            at += varint(out + at, ids);
            for (int64_t i = run_off[r]; i < run_off[r + 1]; i++)
                at += varint(out + at, (uint64_t)loc[runs[i]]);
        }
        out[at++] = 2 << 3 | 2;
        at += varint(out + at, vals);
        for (int j = 0; j < 4; j++)
            at += varint(out + at, (uint64_t)values[4 * r + (uint64_t)j]);
    }
    return at;
}
