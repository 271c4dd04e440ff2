/**
 * @brief Per-thread context switches from /proc/PID/task/TID/status: parser, snapshots, table.
 */
#pragma once

#include <dirent.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dbgkit::targets::ctxsw {

/// One thread's counts. STATE is "live" (read from /proc now), "exited" (captured when the
/// thread ended) or "new" (a delta row for a thread that did not exist at the first snapshot).
struct ThreadSwitches {
    std::string name;
    long tid = 0;
    std::string state;
    std::uint64_t voluntary = 0;
    std::uint64_t involuntary = 0;
};

/// The fields of a status file that matter here.
struct StatusFields {
    std::string name;
    std::uint64_t voluntary = 0;
    std::uint64_t involuntary = 0;
};

/// Parses the text of /proc/.../status (proc(5)): `Name:`, `voluntary_ctxt_switches:` and
/// `nonvoluntary_ctxt_switches:`. Nullopt when one of the three is missing or not a number.
inline std::optional<StatusFields> parse_status(const std::string& text) {
    StatusFields out;
    bool name = false, vol = false, invol = false;
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t eol = text.find('\n', pos);
        if (eol == std::string::npos) {
            eol = text.size();
        }
        const std::string line = text.substr(pos, eol - pos);
        pos = eol + 1;
        const std::size_t colon = line.find(':');
        if (colon == std::string::npos) {
            continue;
        }
        const std::string key = line.substr(0, colon);
        std::size_t v = colon + 1;
        while (v < line.size() && (line[v] == '\t' || line[v] == ' ')) {
            ++v;
        }
        const std::string value = line.substr(v);
        if (key == "Name") {
            out.name = value;
            name = true;
        } else if (key == "voluntary_ctxt_switches" || key == "nonvoluntary_ctxt_switches") {
            if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos) {
                return std::nullopt;
            }
            const std::uint64_t n = std::strtoull(value.c_str(), nullptr, 10);
            if (key[0] == 'v') {
                out.voluntary = n;
                vol = true;
            } else {
                out.involuntary = n;
                invol = true;
            }
        }
    }
    if (!name || !vol || !invol) {
        return std::nullopt;
    }
    return out;
}

namespace detail {

/// The whole content of a (small, /proc) file, or nullopt.
inline std::optional<std::string> slurp(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "re");
    if (f == nullptr) {
        return std::nullopt;
    }
    std::string text;
    char buf[1024];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
        text.append(buf, n);
    }
    std::fclose(f);
    return text;
}

/// "tpc-client-17" -> "tpc-client-*"; a name without a "-DIGITS" tail is its own group.
inline std::string group_name(const std::string& name) {
    const std::size_t dash = name.rfind('-');
    if (dash == std::string::npos || dash + 1 == name.size() ||
        name.find_first_not_of("0123456789", dash + 1) != std::string::npos) {
        return name;
    }
    return name.substr(0, dash + 1) + "*";
}

}  // namespace detail

/// The live threads of process DIR ("/proc/self" or "/proc/PID"), sorted by tid. Threads that exit
/// while the directory is read are skipped. Empty when the directory cannot be read.
inline std::vector<ThreadSwitches> read_tasks(const std::string& dir) {
    std::vector<ThreadSwitches> rows;
    DIR* d = opendir((dir + "/task").c_str());
    if (d == nullptr) {
        return rows;
    }
    while (const dirent* e = readdir(d)) {
        const std::string tid = e->d_name;
        if (tid.empty() || tid.find_first_not_of("0123456789") != std::string::npos) {
            continue;
        }
        const auto text = detail::slurp(dir + "/task/" + tid + "/status");
        if (!text) {
            continue;
        }
        if (const auto fields = parse_status(*text)) {
            rows.push_back({fields->name, std::atol(tid.c_str()), "live", fields->voluntary,
                            fields->involuntary});
        }
    }
    closedir(d);
    std::sort(rows.begin(), rows.end(),
              [](const ThreadSwitches& a, const ThreadSwitches& b) { return a.tid < b.tid; });
    return rows;
}

/// The calling thread's counts so far, as an "exited" row (taken just before the thread ends):
/// /proc/thread-self/status, or getrusage(RUSAGE_THREAD) when /proc is not mounted.
inline ThreadSwitches capture_current_thread() {
    ThreadSwitches row;
    row.tid = static_cast<long>(syscall(SYS_gettid));
    row.state = "exited";
    if (const auto text = detail::slurp("/proc/thread-self/status")) {
        if (const auto fields = parse_status(*text)) {
            row.name = fields->name;
            row.voluntary = fields->voluntary;
            row.involuntary = fields->involuntary;
            return row;
        }
    }
    char name[16] = {};
    pthread_getname_np(pthread_self(), name, sizeof name);
    row.name = name;
    rusage usage{};
    if (getrusage(RUSAGE_THREAD, &usage) == 0) {
        row.voluntary = static_cast<std::uint64_t>(usage.ru_nvcsw);
        row.involuntary = static_cast<std::uint64_t>(usage.ru_nivcsw);
    }
    return row;
}

/// Per-thread differences AFTER - BEFORE: a thread present in both is "live", a thread only in
/// AFTER is "new" (all its switches happened in between). GONE counts threads only in BEFORE.
inline std::vector<ThreadSwitches> deltas(const std::vector<ThreadSwitches>& before,
                                          const std::vector<ThreadSwitches>& after,
                                          std::size_t& gone) {
    std::map<long, const ThreadSwitches*> old;
    for (const ThreadSwitches& row : before) {
        old[row.tid] = &row;
    }
    std::vector<ThreadSwitches> out;
    for (const ThreadSwitches& row : after) {
        ThreadSwitches d = row;
        const auto it = old.find(row.tid);
        if (it != old.end() && it->second->voluntary <= row.voluntary &&
            it->second->involuntary <= row.involuntary) {
            d.voluntary -= it->second->voluntary;
            d.involuntary -= it->second->involuntary;
            old.erase(it);
        } else {
            d.state = "new";
        }
        out.push_back(d);
    }
    gone = old.size();
    return out;
}

/**
 * A fixed-width table, one row per thread, then a total row. Threads named NAME-DIGITS (e.g.
 * "tpc-client-17") form a group; a group of more than MAX_GROUP_ROWS threads is printed as one
 * summary row "tpc-client-* (N threads)" whose state column says how many are live and exited,
 * so the table stays readable with 1024 clients.
 */
inline std::string format_table(const std::vector<ThreadSwitches>& rows,
                                std::size_t max_group_rows = 8) {
    struct Group {
        std::vector<const ThreadSwitches*> members;
    };
    std::vector<std::string> order;
    std::map<std::string, Group> groups;
    for (const ThreadSwitches& row : rows) {
        const std::string key = detail::group_name(row.name);
        auto [it, fresh] = groups.try_emplace(key);
        if (fresh) {
            order.push_back(key);
        }
        it->second.members.push_back(&row);
    }
    std::string out;
    char line[160];
    std::snprintf(line, sizeof line, "%-28s %8s  %-20s %12s %12s\n", "thread", "tid", "state",
                  "voluntary", "involuntary");
    out += line;
    std::uint64_t total_vol = 0, total_invol = 0;
    for (const std::string& key : order) {
        const Group& g = groups[key];
        if (g.members.size() <= max_group_rows) {
            for (const ThreadSwitches* r : g.members) {
                std::snprintf(line, sizeof line, "%-28s %8ld  %-20s %12llu %12llu\n",
                              r->name.c_str(), r->tid, r->state.c_str(),
                              static_cast<unsigned long long>(r->voluntary),
                              static_cast<unsigned long long>(r->involuntary));
                out += line;
                total_vol += r->voluntary;
                total_invol += r->involuntary;
            }
            continue;
        }
        std::map<std::string, std::size_t> states;
        std::uint64_t vol = 0, invol = 0;
        for (const ThreadSwitches* r : g.members) {
            ++states[r->state];
            vol += r->voluntary;
            invol += r->involuntary;
        }
        std::string state;
        for (const auto& [name, count] : states) {
            state += (state.empty() ? "" : ", ") + std::to_string(count) + " " + name;
        }
        const std::string label = key + " (" + std::to_string(g.members.size()) + " threads)";
        std::snprintf(line, sizeof line, "%-28s %8s  %-20s %12llu %12llu\n", label.c_str(), "-",
                      state.c_str(), static_cast<unsigned long long>(vol),
                      static_cast<unsigned long long>(invol));
        out += line;
        total_vol += vol;
        total_invol += invol;
    }
    const std::string label = "total (" + std::to_string(rows.size()) + " threads)";
    std::snprintf(line, sizeof line, "%-28s %8s  %-20s %12llu %12llu\n", label.c_str(), "-", "",
                  static_cast<unsigned long long>(total_vol),
                  static_cast<unsigned long long>(total_invol));
    out += line;
    return out;
}

}  // namespace dbgkit::targets::ctxsw
