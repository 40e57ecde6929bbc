// C++ CPU host: the work happens in a class method and a function template
// inside a namespace, so a profile must show demangled, readable names.
#include <pthread.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>

namespace work {

static volatile unsigned long sink;

template <typename T> __attribute__((noinline)) T mix(T x, long n)
{
    for (long i = 0; i < n; i++)
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x;
}

class Burner {
  public:
    __attribute__((noinline)) void churn(long n)
    {
        sink = mix<unsigned long>(sink, n);
    }
};

} // namespace work

static void *run(void *)
{
    work::Burner b;
    for (;;)
        b.churn(1000000);
    return nullptr;
}

int main(int argc, char **argv)
{
    int secs = argc > 1 ? atoi(argv[1]) : 30;
    pthread_t t;
    pthread_create(&t, nullptr, run, nullptr);
    std::printf("running\n");
    std::fflush(stdout);
    sleep(secs);
    return 0;
}
