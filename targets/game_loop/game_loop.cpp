/**
 * @brief A small game loop that names its memory with memdump_api.h: each level is a
 * MEMDUMP_PHASE, each subsystem a MEMDUMP_TAG_SCOPE (assets, entities, physics, ai), and the audio
 * mixer runs on a worker thread with its own tag. Three faults are built in (README.md): a texture
 * cache that keeps a level's textures into the next level, a navigation grid leaked once per
 * level, and an entity vector that regrows because nobody reserved it (`--reserve` fixes that).
 *
 * Deterministic: no randomness, no clock, a fixed number of frames; the main thread makes no heap
 * operation while the audio thread works, so the order of the heap events (and every event
 * number) is the same in every run. A line marked `// BREAK: name` (LEAK:, OUTLIVE:, GROW:) is
 * what tests/e2e/test_game_loop.py looks up.
 */
#include <array>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "bench_cli.hpp"
#include "memdump_api.h"

namespace game {

constexpr int kFrames = 30;             // frames per level
constexpr int kMeshes = 4;              // meshes per level...
constexpr int kMeshVertices = 512;      // ...of 512 vertices (x, y, z floats): 6,144 bytes each
constexpr int kTextures = 2;            // textures per level...
constexpr int kTextureSide = 64;        // ...of 64 x 64 RGBA pixels: 16,384 bytes each
constexpr int kEntitiesPerLevel = 12;   // level L spawns 12 * L entities
constexpr int kAgentEvery = 4;          // entities 0, 4, 8, ... are AI agents: 3 * L of them
constexpr int kReplanEvery = 10;        // agents plan a path at frames 0, 10 and 20
constexpr int kMaxPath = 32;            // a path holds 32 nodes of 8 bytes: 256 bytes
constexpr int kGridSide = 32;           // the navigation grid: 32 x 32 cells of a byte: 1,024 bytes
constexpr int kSounds = 3;              // sounds per level...
constexpr int kSoundSamples = 1024;     // ...of 1,024 float samples: 4,096 bytes each
constexpr int kMixSamples = 512;        // a frame's stereo mix: 512 floats, 2,048 bytes
constexpr float kWorld = 100.0f;        // the world is 100 x 100 units
constexpr float kRadius = 4.0f;         // every entity is a disc of this radius

struct PathNode {
    std::int32_t x, y;  // a cell of the navigation grid
};

struct Entity {
    float x, y, vx, vy;
    std::uint32_t id, kind;   // kind 1: an AI agent
    PathNode* path;           // an agent's current path (kMaxPath nodes), owned
};
static_assert(sizeof(Entity) == 32, "the README's figures count 32-byte entities");

struct Contact {
    std::uint32_t a, b;  // the two entities
    float nx, ny;        // from a to b, scaled by the overlap
};
static_assert(sizeof(Contact) == 16, "the README's figures count 16-byte contacts");

struct NavGrid {
    std::uint8_t blocked[kGridSide][kGridSide];  // 1: a wall
};

int cell(float coordinate) {
    const int c = static_cast<int>(coordinate * kGridSide / kWorld);
    return c < 0 ? 0 : (c >= kGridSide ? kGridSide - 1 : c);
}

/// The textures of the levels, by (level, slot). The fault: trim() runs when the next level has
/// loaded its own, so a level's textures outlive it and are freed one level late.
class TextureCache {
public:
    ~TextureCache() { clear(); }

    const std::uint8_t* load(int level, int slot) {
        for (Entry& e : entries_) {
            if (e.pixels != nullptr && e.level == level && e.slot == slot) {
                return e.pixels;
            }
        }
        for (Entry& e : entries_) {
            if (e.pixels == nullptr) {
                const int bytes = kTextureSide * kTextureSide * 4;
                e.pixels = new std::uint8_t[bytes];  // OUTLIVE: texture
                for (int i = 0; i < bytes; i++) {  // a checkerboard in the level's colour
                    const int x = (i / 4) % kTextureSide, y = (i / 4) / kTextureSide;
                    e.pixels[i] = static_cast<std::uint8_t>(((x / 8 + y / 8) % 2) * 40 * level +
                                                            slot * 7 + i % 4);
                }
                e.level = level;
                e.slot = slot;
                return e.pixels;
            }
        }
        std::fprintf(stderr, "game_loop: the texture cache is full\n");
        std::exit(1);
    }

    /// Frees the textures of every level but LEVEL.
    void trim(int level) {
        for (Entry& e : entries_) {
            if (e.pixels != nullptr && e.level != level) {
                delete[] e.pixels;
                e.pixels = nullptr;  // BREAK: trim
            }
        }
    }

    void clear() { trim(0); }

private:
    struct Entry {
        int level = 0, slot = 0;
        std::uint8_t* pixels = nullptr;
    };
    std::array<Entry, 2 * kTextures> entries_{};  // room for two levels' textures
};

/// The audio mixer on a thread of its own, one job at a time: load a level's sounds, mix a
/// frame, unload them. Its allocations are tagged "audio" whatever the main thread's tag is.
class AudioWorker {
public:
    enum class Job { kNone, kLoadBank, kMix, kUnloadBank, kQuit };

    AudioWorker() : thread_([this] { run(); }) {}
    ~AudioWorker() {
        post(Job::kQuit, 0);
        thread_.join();
    }

    /// Hands JOB to the thread (after the previous one finished).
    void post(Job job, int argument) {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [this] { return job_ == Job::kNone; });
        job_ = job;
        argument_ = argument;
        changed_.notify_all();
    }

    /// Waits for the job posted last; its result.
    std::uint32_t wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [this] { return job_ == Job::kNone; });
        return result_;
    }

private:
    void run() {
        memdump_tag_push("audio");  // the C interface: this thread's tag, until the pop
        for (;;) {
            Job job;
            int argument;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                changed_.wait(lock, [this] { return job_ != Job::kNone; });
                job = job_;
                argument = argument_;
            }
            if (job == Job::kQuit) {
                break;
            }
            std::uint32_t result = 0;
            if (job == Job::kLoadBank) {
                load_bank(argument);
            } else if (job == Job::kMix) {
                result = mix(argument);
            } else {
                for (float*& sound : sounds_) {
                    delete[] sound;
                    sound = nullptr;
                }
            }
            std::lock_guard<std::mutex> lock(mutex_);
            job_ = Job::kNone;
            result_ = result;
            changed_.notify_all();
        }
        memdump_tag_pop();
    }

    void load_bank(int level) {
        for (int s = 0; s < kSounds; s++) {
            sounds_[s] = new float[kSoundSamples];  // BREAK: sound
            const int period = 16 * (s + 1) + level;  // a triangle wave per sound
            for (int i = 0; i < kSoundSamples; i++) {
                const int phase = i % period;
                sounds_[s][i] = static_cast<float>(phase < period / 2 ? phase : period - phase) /
                                static_cast<float>(period) - 0.25f;
            }
        }
    }

    std::uint32_t mix(int frame) {
        float* out = new float[kMixSamples];  // left and right interleaved
        std::uint32_t sum = 0;
        for (int i = 0; i < kMixSamples; i++) {
            float v = 0.0f;
            for (int s = 0; s < kSounds; s++) {
                v += sounds_[s][(frame * kMixSamples / 2 + i / 2 + s * 100) % kSoundSamples] *
                     (i % 2 == 0 ? 0.6f : 0.4f);
            }
            out[i] = v;
            sum = sum * 31 + static_cast<std::uint32_t>(static_cast<int>(v * 1000.0f) & 0xffff);
        }
        delete[] out;
        return sum;
    }

    std::mutex mutex_;
    std::condition_variable changed_;
    Job job_ = Job::kNone;
    int argument_ = 0;
    std::uint32_t result_ = 0;
    float* sounds_[kSounds] = {};
    std::thread thread_;  // last: it starts once the rest is built
};

/// One frame's collisions: every pair of overlapping discs, pushed apart.
std::uint32_t physics_step(std::vector<Entity>& entities) {
    const std::size_t n = entities.size();
    Contact* contacts = new Contact[n];  // BREAK: contacts  (one per entity; more wait a frame)
    std::size_t count = 0;
    for (std::size_t i = 0; i < n && count < n; i++) {
        for (std::size_t j = i + 1; j < n && count < n; j++) {
            const float dx = entities[j].x - entities[i].x, dy = entities[j].y - entities[i].y;
            const float overlap = 2 * kRadius - (dx < 0 ? -dx : dx) - (dy < 0 ? -dy : dy);
            if (overlap > 0) {
                contacts[count++] = {static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j),
                                     dx >= 0 ? overlap / 2 : -overlap / 2,
                                     dy >= 0 ? overlap / 2 : -overlap / 2};
            }
        }
    }
    for (std::size_t c = 0; c < count; c++) {
        Entity& a = entities[contacts[c].a];
        Entity& b = entities[contacts[c].b];
        a.x -= contacts[c].nx;
        a.y -= contacts[c].ny;
        b.x += contacts[c].nx;
        b.y += contacts[c].ny;
    }
    delete[] contacts;
    return static_cast<std::uint32_t>(count);
}

/// The level's walls: a vertical wall at column 8 + 4 * level with a gap, and a horizontal one.
NavGrid* build_nav_grid(int level) {
    auto* grid = new NavGrid();  // LEAK: nav-grid
    const int column = 8 + 4 * (level % 5);
    for (int y = 0; y < kGridSide; y++) {
        grid->blocked[y][column] = (y < 12 || y > 15) ? 1 : 0;
        grid->blocked[20][y] = (y % 10 != 3) ? 1 : 0;
    }
    return grid;
}

/// A straight path (Bresenham) from the agent's cell towards the target's, up to a wall or
/// kMaxPath nodes; the agent heads for its second node.
std::uint32_t plan_path(Entity& agent, const Entity& target, const NavGrid& grid) {
    auto* path = new PathNode[kMaxPath];  // BREAK: path
    int x = cell(agent.x), y = cell(agent.y);
    const int tx = cell(target.x), ty = cell(target.y);
    const int dx = tx > x ? tx - x : x - tx, dy = ty > y ? ty - y : y - ty;
    const int sx = x < tx ? 1 : -1, sy = y < ty ? 1 : -1;
    int err = dx - dy;
    std::uint32_t nodes = 0;
    while (nodes < kMaxPath && grid.blocked[y][x] == 0) {
        path[nodes++] = {x, y};
        if (x == tx && y == ty) {
            break;
        }
        const int e2 = 2 * err;
        if (e2 > -dy) {
            err -= dy;
            x += sx;
        }
        if (e2 < dx) {
            err += dx;
            y += sy;
        }
    }
    delete[] agent.path;
    agent.path = path;
    if (nodes > 1) {
        agent.vx = static_cast<float>(path[1].x - path[0].x) * 0.5f;
        agent.vy = static_cast<float>(path[1].y - path[0].y) * 0.5f;
    }
    return nodes;
}

struct Options {
    int levels = 3;
    bool reserve = false;  // reserve the entity vector: no regrowth
};

struct Level {
    int number = 0;
    std::array<std::unique_ptr<float[]>, kMeshes> meshes;
    std::vector<Entity> entities;
    NavGrid* nav = nullptr;  // the AI's; nobody deletes it (the leak)
    std::uint32_t contacts = 0, path_nodes = 0, audio = 0;
};

class Game {
public:
    explicit Game(const Options& options) : options_(options) {}

    void play_level(int number) {
        char name[16];
        std::snprintf(name, sizeof name, "level %d", number);
        MEMDUMP_PHASE(name);
        Level level;
        level.number = number;
        load(level);
        for (int frame = 0; frame < kFrames; frame++) {
            run_frame(level, frame);  // BREAK: frame
        }
        unload(level);
        std::printf("%s: %zu entities, %d frames, %u contacts, %u path nodes, audio %08x\n", name,
                    level.entities.size(), kFrames, level.contacts, level.path_nodes, level.audio);
    }

    void shutdown() {
        MEMDUMP_PHASE("shutdown");
        MEMDUMP_TAG_SCOPE("assets");
        textures_.clear();  // the last level's textures
    }

private:
    void load(Level& level) {
        MEMDUMP_TAG_SCOPE("assets");
        for (int m = 0; m < kMeshes; m++) {
            level.meshes[m].reset(new float[kMeshVertices * 3]);  // BREAK: mesh
            for (int v = 0; v < kMeshVertices * 3; v++) {  // a grid of vertices, level high
                level.meshes[m][v] = static_cast<float>(v % 3 == 2 ? level.number : v / 3 % 16);
            }
        }
        for (int t = 0; t < kTextures; t++) {
            textures_.load(level.number, t);
        }
        textures_.trim(level.number);  // the fault: the previous level's go only now
        {
            MEMDUMP_TAG_SCOPE("entities");  // nested: the innermost tag wins
            spawn(level);
        }
        {
            MEMDUMP_TAG_SCOPE("ai");
            level.nav = build_nav_grid(level.number);  // BREAK: grid
        }
        audio_.post(AudioWorker::Job::kLoadBank, level.number);  // tagged "audio", not "assets"
        audio_.wait();
    }

    void spawn(Level& level) {
        const int count = kEntitiesPerLevel * level.number;
        if (options_.reserve) {
            level.entities.reserve(count);
        }
        for (int i = 0; i < count; i++) {
            const auto id = static_cast<std::uint32_t>(i);
            level.entities.push_back(Entity{  // GROW: spawn
                static_cast<float>(i * 37 % 100), static_cast<float>(i * 61 % 100),
                static_cast<float>(i % 7 - 3) * 0.5f, static_cast<float>(i % 5 - 2) * 0.5f, id,
                i % kAgentEvery == 0 ? 1u : 0u, nullptr});
        }
    }

    void run_frame(Level& level, int frame) {
        {
            MEMDUMP_TAG_SCOPE("physics");
            level.contacts += physics_step(level.entities);  // BREAK: physics
        }
        if (frame % kReplanEvery == 0) {
            MEMDUMP_TAG_SCOPE("ai");
            for (Entity& e : level.entities) {
                if (e.kind == 1) {
                    level.path_nodes += plan_path(e, level.entities[1], *level.nav);
                }
            }
        }
        // The audio thread mixes the frame while this one moves the entities (no heap here).
        audio_.post(AudioWorker::Job::kMix, frame);
        for (Entity& e : level.entities) {
            e.x += e.vx;
            e.y += e.vy;
            if (e.x < 0 || e.x > kWorld) {
                e.vx = -e.vx;
            }
            if (e.y < 0 || e.y > kWorld) {
                e.vy = -e.vy;
            }
        }
        level.audio ^= audio_.wait();
    }

    void unload(Level& level) {
        for (auto& mesh : level.meshes) {
            mesh.reset();
        }
        for (Entity& e : level.entities) {
            delete[] e.path;
            e.path = nullptr;
        }
        // level.nav is not deleted: the leak. The textures stay in the cache (the fault).
        audio_.post(AudioWorker::Job::kUnloadBank, 0);
        audio_.wait();
    }

    Options options_;
    TextureCache textures_;
    AudioWorker audio_;
};

}  // namespace game

int main(int argc, char** argv) {
    using dbgkit::targets::cli::Args;
    using dbgkit::targets::cli::Program;
    static const Program program{
        "game_loop",
        "usage: game_loop [--levels N] [--reserve]\n"
        "  --levels N   play N levels (1 to 9, default 3), each a memdump phase\n"
        "  --reserve    reserve the entity vector before spawning (no regrowth)\n"};
    game::Options options;
    Args args(program, argc, argv);
    while (args.next()) {
        if (args.is("--levels")) {
            options.levels = static_cast<int>(args.count(1, 9));
        } else if (args.is("--reserve")) {
            options.reserve = true;
        } else {
            args.unknown();
        }
    }
    std::printf("game_loop: %d levels of %d frames%s\n", options.levels, game::kFrames,
                options.reserve ? ", entities reserved" : "");
    game::Game game(options);
    for (int level = 1; level <= options.levels; level++) {
        game.play_level(level);
    }
    game.shutdown();
    return 0;
}
