/*
 * The loaded-objects generation: one counter that says "the set of loaded
 * objects changed". Bumped by whoever learns it (the dlclose interposer,
 * the program-header snapshot when the loader's add/remove counts moved);
 * read by whoever keeps something per object (the symbolizer), which
 * compares it with the generation it last rebuilt at instead of being
 * called.
 *
 * Contexts: any thread; the bump and the read are single atomic
 * operations, async-signal-safe.
 */
#include "agent/agent.h"

static unsigned generation;

PPROF_SIGNAL_SAFE void objects_changed(void)
{
    __atomic_add_fetch(&generation, 1, __ATOMIC_SEQ_CST);
}

PPROF_SIGNAL_SAFE unsigned objects_generation(void)
{
    return __atomic_load_n(&generation, __ATOMIC_SEQ_CST);
}
