// Drives the Rein matcher (built from the peers' public sources, whose folder is given
// at compile time with -I) on a workload dumped by experiments/bench_rein.py, so that
// both matchers see the same subscriptions and events.
//
// Input (text, whitespace separated):
//   subscriptions: n size attributes domain, then per subscription `size` triples
//                  (attribute low high), the interval low <= value <= high;
//   events:        m attributes, then per event `attributes` values (every attribute
//                  has a value: Rein's interval match needs all of them).
// Output (text): "insert_s <seconds>", "peak_kib <VmHWM>", then one line per event:
//   <matched subscriptions> <match nanoseconds>.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "rein.h"

// The peak resident memory of this process (VmHWM): unlike getrusage's ru_maxrss, which
// Linux keeps across execve, it counts this program only, not the process that started it.
static long peak_kib() {
    FILE* status = std::fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (status && std::fgets(line, sizeof line, status))
        if (std::strncmp(line, "VmHWM:", 6) == 0) std::sscanf(line + 6, "%ld", &kib);
    if (status) std::fclose(status);
    return kib;
}

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: rein_driver SUBSCRIPTIONS EVENTS OUT\n");
        return 2;
    }
    FILE* subs_file = std::fopen(argv[1], "r");
    FILE* events_file = std::fopen(argv[2], "r");
    FILE* out = std::fopen(argv[3], "w");
    if (!subs_file || !events_file || !out) {
        std::fprintf(stderr, "rein_driver: cannot open a file\n");
        return 2;
    }
    int n = 0, size = 0, attributes = 0, domain = 0;
    if (std::fscanf(subs_file, "%d %d %d %d", &n, &size, &attributes, &domain) != 4) return 3;
    std::vector<IntervalSub> subs(n);
    for (int q = 0; q < n; q++) {
        subs[q].id = q;
        subs[q].size = size;
        subs[q].constraints.resize(size);
        for (int j = 0; j < size; j++) {
            IntervalCnt& c = subs[q].constraints[j];
            if (std::fscanf(subs_file, "%d %d %d", &c.att, &c.lowValue, &c.highValue) != 3) return 3;
        }
    }
    Rein* rein = new Rein(domain);  // (its buckets are a large member array: not on the stack)
    auto t0 = std::chrono::steady_clock::now();
    for (int q = 0; q < n; q++) rein->insert(subs[q]);
    double insert_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    int m = 0, event_attributes = 0;
    if (std::fscanf(events_file, "%d %d", &m, &event_attributes) != 2) return 3;
    std::vector<Pub> pubs(m);
    for (int e = 0; e < m; e++) {
        pubs[e].size = event_attributes;
        pubs[e].pairs.resize(event_attributes);
        for (int a = 0; a < event_attributes; a++) {
            pubs[e].pairs[a].att = a;
            if (std::fscanf(events_file, "%d", &pubs[e].pairs[a].value) != 1) return 3;
        }
    }
    std::fprintf(out, "insert_s %.9f\n", insert_s);
    std::vector<long long> nanos(m);
    std::vector<int> counts(m);
    for (int e = 0; e < m; e++) {
        int matched = 0;
        auto start = std::chrono::steady_clock::now();
        rein->match(pubs[e], matched, subs);
        nanos[e] = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
        counts[e] = matched;
    }
    std::fprintf(out, "peak_kib %ld\n", peak_kib());
    for (int e = 0; e < m; e++) std::fprintf(out, "%d %lld\n", counts[e], nanos[e]);
    std::fclose(out);
    return 0;
}
