/*
 * The shared object attach_late dlopens after an attach
 * (test/integration/attach_late.sh): its calls to malloc and free are
 * its own relocations, which the agent must point at itself once it
 * notices the object; plugin_malloc says where they lead. plugin_allocate allocates a known set of blocks in
 * plugin_block, frees a third of them at once and keeps the rest, and
 * reports what it allocated.
 */
#include <stdlib.h>

#define BLOCKS 3000

static void *kept[BLOCKS];

__attribute__((noinline)) static void *plugin_block(long size)
{
    return malloc((size_t)size);
}

/* The address of malloc this object's GOT holds (a GLOB_DAT relocation,
 * bound with its PLT's JUMP_SLOT): the program looks where it leads. */
void *plugin_malloc(void);
void *plugin_malloc(void)
{
    void *(*volatile p)(size_t) = malloc;
    return (void *)p;
}

void plugin_allocate(long *objects, long *bytes);
void plugin_allocate(long *objects, long *bytes)
{
    for (int i = 0; i < BLOCKS; i++) {
        long size = 64 + (i % 7) * 40;
        char *p = plugin_block(size);
        if (!p)
            continue;
        p[0] = 1;
        *objects += 1;
        *bytes += size;
        if (i % 3 == 0)
            free(p);
        else
            kept[i] = p;
    }
}
