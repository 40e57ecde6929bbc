// A multithreaded C++ host for pprof-attach, started without the agent.
//
// Each round, 4 std::thread workers share 3000 items through a counter
// under a std::mutex: for each item, a std::vector of new'd values is
// filled and summed, a std::string is made, and both go into a std::map
// under the same mutex (waits, allocations and frees all the time). The
// round's result (a sum over the items, and a hash of the map in key order)
// does not depend on which worker took which item. Rounds run until the
// file argv[1] exists (looked at after each round); every round must give
// the first round's result.
//
// stdout: "result=HEX items=3000 workers=4", the same for every run
// however many rounds it made; stderr: "started" after the first round,
// and any round that differed. Exit status 0, or 1 when a round differed.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

const int ITEMS = 3000;
const int WORKERS = 4;

struct Round {
    std::mutex lock;
    int next = 0;
    uint64_t sum = 0;
    std::map<int, std::unique_ptr<std::string>> names;
};

uint64_t item_value(int item)
{
    auto *v = new std::vector<uint64_t>(static_cast<size_t>(item % 97 + 1));
    uint64_t x = static_cast<uint64_t>(item) * 2654435761u + 1;
    for (auto &e : *v) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        e = x >> 17;
    }
    uint64_t s = 0;
    for (auto e : *v)
        s += e;
    delete v;
    return s;
}

void worker(Round *r)
{
    for (;;) {
        int item;
        {
            std::lock_guard<std::mutex> g(r->lock);
            item = r->next++;
        }
        if (item >= ITEMS)
            return;
        uint64_t s = item_value(item);
        auto name = std::make_unique<std::string>(std::to_string(s % 100003));
        std::lock_guard<std::mutex> g(r->lock);
        r->sum += s;
        r->names[item] = std::move(name);
    }
}

uint64_t run_round()
{
    Round r;
    std::vector<std::thread> ts;
    for (int i = 0; i < WORKERS; i++)
        ts.emplace_back(worker, &r);
    for (auto &t : ts)
        t.join();
    uint64_t h = 1469598103934665603ULL;
    for (auto &kv : r.names)
        for (char c : *kv.second)
            h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
    return r.sum ^ h;
}

} // namespace

int main(int argc, char **argv)
{
    if (argc < 2) {
        std::fprintf(stderr, "usage: attach_cxx STOPFILE\n");
        return 2;
    }
    uint64_t first = run_round();
    std::fprintf(stderr, "started\n");
    int bad = 0;
    while (access(argv[1], F_OK) != 0) {
        uint64_t again = run_round();
        if (again != first) {
            std::fprintf(stderr, "round differed: %016llx, first %016llx\n",
                         static_cast<unsigned long long>(again),
                         static_cast<unsigned long long>(first));
            bad = 1;
        }
    }
    std::printf("result=%016llx items=%d workers=%d\n",
                static_cast<unsigned long long>(first), ITEMS, WORKERS);
    return bad;
}
