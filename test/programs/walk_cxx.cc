// A C++ program for the walker's truth test (test/integration/walk_truth.sh),
// built as release code is (-O2, no frame pointers): exceptions thrown
// through deep recursion and caught far up (samples land in libgcc's and
// libstdc++'s unwinder and personality routines), deep template recursion
// that the compiler keeps as separate frames, std::function chains, sorting
// with a comparator, on three worker threads. Runs for SECONDS of wall time
// and, given a PROGRESS file (the harness's, "compared N"), until it says
// MIN samples were compared too (at most 180 s); prints a checksum.
//
//   walk_cxx SECONDS [PROGRESS MIN]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <variant>
#include <vector>

static volatile unsigned long sink;

struct Deep : std::runtime_error {
    int depth;
    explicit Deep(int d) : std::runtime_error("deep"), depth(d) {}
};

// Template recursion: Level<N> calls Level<N-1>, each a frame of its own.
template <int N> struct Level {
    __attribute__((noinline)) static unsigned long run(unsigned long x,
                                                       const std::function<unsigned long(unsigned long)> &leaf)
    {
        std::string s(static_cast<size_t>(N % 7 + 1), static_cast<char>('a' + N % 26));
        unsigned long r = Level<N - 1>::run(x * 31 + N, leaf);
        return r ^ s.size();
    }
};
template <> struct Level<0> {
    __attribute__((noinline)) static unsigned long run(unsigned long x,
                                                       const std::function<unsigned long(unsigned long)> &leaf)
    {
        return leaf(x);
    }
};

__attribute__((noinline)) static unsigned long thrower(int depth, unsigned long x)
{
    std::vector<int> guard(static_cast<size_t>(depth % 5 + 1), depth);
    if (depth == 0) {
        if (x % 3 == 0)
            throw Deep(static_cast<int>(x % 17));
        return x + guard.size();
    }
    return thrower(depth - 1, x * 7 + 1) + guard[0];
}

__attribute__((noinline)) static unsigned long catching(unsigned long x)
{
    try {
        return thrower(24, x);
    } catch (const Deep &d) {
        return static_cast<unsigned long>(d.depth);
    }
}

using Value = std::variant<long, double, std::string>;

struct Visit {
    unsigned long operator()(long v) const { return static_cast<unsigned long>(v) * 3; }
    unsigned long operator()(double v) const { return static_cast<unsigned long>(v * 1.5); }
    unsigned long operator()(const std::string &s) const
    {
        unsigned long h = 0;
        for (char c : s)
            h = h * 131 + static_cast<unsigned char>(c);
        return h;
    }
};

__attribute__((noinline)) static unsigned long sorting(unsigned long seed)
{
    std::vector<std::string> words;
    for (int i = 0; i < 400; i++)
        words.push_back(std::to_string((seed + static_cast<unsigned long>(i) * 2654435761u) % 100000));
    std::sort(words.begin(), words.end(), [](const std::string &a, const std::string &b) {
        return a.size() != b.size() ? a.size() < b.size() : a < b;
    });
    std::map<std::string, Value> m;
    for (size_t i = 0; i < words.size(); i++) {
        if (i % 3 == 0)
            m[words[i]] = static_cast<long>(i);
        else if (i % 3 == 1)
            m[words[i]] = static_cast<double>(i) / 3;
        else
            m[words[i]] = words[i] + "x";
    }
    unsigned long h = 0;
    for (auto &kv : m)
        h += std::visit(Visit{}, kv.second);
    return h;
}

static std::atomic<bool> done;

static void work(unsigned long *out)
{
    unsigned long h = 0;
    std::function<unsigned long(unsigned long)> leaf = [&](unsigned long x) {
        return catching(x) + sorting(x) % 1000;
    };
    for (unsigned long i = 0; !done.load(std::memory_order_relaxed); i++)
        h += Level<40>::run(i, leaf);
    *out = h;
}

// The samples compared so far, from the harness's progress file (0 when
// there is none yet).
static long compared(const char *path)
{
    long n = 0;
    if (FILE *f = std::fopen(path, "r")) {
        if (std::fscanf(f, "compared %ld", &n) != 1)
            n = 0;
        std::fclose(f);
    }
    return n;
}

// Returns once SECONDS passed and, with a progress file, MIN samples were
// compared; 180 s at most.
static void wait_enough(double seconds, const char *progress, long min)
{
    auto start = std::chrono::steady_clock::now();
    auto end = start + std::chrono::duration<double>(seconds);
    auto most = start + std::chrono::seconds(180);
    for (;;) {
        auto now = std::chrono::steady_clock::now();
        if (now >= most || (now >= end && (!progress || compared(progress) >= min)))
            return;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 3;
    unsigned long a = 0, b = 0, c = 0;
    std::thread t1(work, &a), t2(work, &b), t3(work, &c);
    wait_enough(seconds, argc > 3 ? argv[2] : nullptr, argc > 3 ? atol(argv[3]) : 0);
    done = true;
    t1.join();
    t2.join();
    t3.join();
    sink = a + b + c;
    printf("walk_cxx done %lu\n", static_cast<unsigned long>(sink != 0));
    return 0;
}
