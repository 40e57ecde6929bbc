/*
 * Unit tests for the public API's internals: label sets (interning gives
 * one set per distinct content, whatever the order keys were set in;
 * set/clear/restore semantics; limits) and custom profiles (name rules,
 * exact key accounting through many adds and removes, which grows and
 * rehashes the key map with tombstones, and the per-stack counts).
 */
#define PPROF_AGENT_BUILD
#include "agent/pprofagent.h"

#include "agent/stacks/cfi.h"
#include "agent/custom/custom.h"
#include "agent/core/labels.h"
#include "agent/stacks/stack.h"
#include "agent/stacks/stack_table.h"
#include "harness.h"

#include <errno.h>

TEST(labels_intern_by_content)
{
    pprof_agent_labels_restore(NULL);
    expect_int_eq(pprof_agent_label_set("b", "2"), 0);
    expect_int_eq(pprof_agent_label_set("a", "1"), 0);
    pprof_labels first = pprof_agent_labels_save();
    assert_true(first != NULL);
    expect_int_eq(first->n, 2);
    expect_str_eq(first->pairs[0].key, "a"); /* sorted by key */
    expect_str_eq(first->pairs[1].value, "2");

    pprof_agent_labels_restore(NULL);
    pprof_agent_label_set("a", "1");
    pprof_agent_label_set("b", "2");
    expect_true(pprof_agent_labels_save() == first); /* same set, same id */
    expect_true(labels_by_id(first->id) == first);
    expect_int_eq(labels_current_id(), first->id);

    pprof_agent_label_set("a", "9"); /* replaces */
    pprof_labels changed = pprof_agent_labels_save();
    expect_int_eq(changed->n, 2);
    expect_str_eq(changed->pairs[0].value, "9");
    expect_true(changed != first);

    pprof_agent_label_clear("a");
    expect_int_eq(pprof_agent_labels_save()->n, 1);
    pprof_agent_label_clear("b");
    expect_true(pprof_agent_labels_save() == NULL); /* empty set is NULL */
    expect_int_eq(labels_current_id(), 0);

    pprof_agent_labels_restore(first);
    expect_true(pprof_agent_labels_save() == first);
    pprof_agent_labels_restore(NULL);
}

TEST(labels_limits)
{
    pprof_agent_labels_restore(NULL);
    expect_int_eq(pprof_agent_label_set("", "v"), -EINVAL);
    expect_int_eq(pprof_agent_label_set("k", ""), -EINVAL);
    expect_int_eq(pprof_agent_label_set("k", NULL), -EINVAL);
    char big[LABELS_MAX_LEN + 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    expect_int_eq(pprof_agent_label_set(big, "v"), -EINVAL);
    char key[16];
    for (int i = 0; i < LABELS_MAX_PAIRS; i++) {
        snprintf(key, sizeof key, "k%02d", i);
        expect_int_eq(pprof_agent_label_set(key, "v"), 0);
    }
    expect_int_eq(pprof_agent_label_set("one-more", "v"), -E2BIG);
    expect_int_eq(pprof_agent_label_set("k00", "changed"), 0); /* replace ok */
    expect_int_eq(pprof_agent_labels_save()->n, LABELS_MAX_PAIRS);
    pprof_agent_labels_restore(NULL);
}

TEST(custom_names)
{
    expect_true(custom_name_allowed("example.com/blobs"));
    expect_true(custom_name_allowed("a_b-c+d.e"));
    expect_true(!custom_name_allowed(""));
    expect_true(!custom_name_allowed("heap"));
    expect_true(!custom_name_allowed("goroutine"));
    expect_true(!custom_name_allowed("profile"));
    /* The agent's own endpoints are taken: a custom profile there could
     * never be served. */
    expect_true(!custom_name_allowed("flamegraph"));
    expect_true(!custom_name_allowed("processes"));
    expect_true(!custom_name_allowed("/lead"));
    expect_true(!custom_name_allowed("trail/"));
    expect_true(!custom_name_allowed("a b"));
    expect_true(!custom_name_allowed("a<b"));
    errno = 0;
    expect_true(pprof_agent_profile_new("mutex") == NULL);
    expect_int_eq(errno, EINVAL);
}

static uintptr_t pcs_of(struct stack_entry *e) { return e->pcs[0]; }

TEST(custom_keys_exact)
{
    stack_init();
    pprof_profile *p = pprof_agent_profile_new("unit.keys");
    assert_true(p != NULL);
    errno = 0;
    expect_true(pprof_agent_profile_new("unit.keys") == NULL);
    expect_int_eq(errno, EEXIST);
    expect_true(pprof_agent_profile_lookup("unit.keys") == p);

    /* 50000 keys in, every other one out, then all out: the count is exact
     * at each step and removed keys are gone (tombstones, rehashes). */
    enum { N = 50000 };
    for (uintptr_t k = 1; k <= N; k++)
        expect_int_eq(pprof_agent_profile_add(p, (void *)(k * 16), 0), 0);
    expect_int_eq(pprof_agent_profile_count(p), N);
    expect_int_eq(pprof_agent_profile_add(p, (void *)16, 0), -EEXIST);
    for (uintptr_t k = 2; k <= N; k += 2)
        expect_int_eq(pprof_agent_profile_remove(p, (void *)(k * 16)), 0);
    expect_int_eq(pprof_agent_profile_count(p), N / 2);
    expect_int_eq(pprof_agent_profile_remove(p, (void *)32), -ENOENT);
    for (uintptr_t k = 1; k <= N; k += 2)
        expect_int_eq(pprof_agent_profile_remove(p, (void *)(k * 16)), 0);
    expect_int_eq(pprof_agent_profile_count(p), 0);
    expect_int_eq(pprof_agent_profile_add(p, NULL, 0), 0); /* any identity */
    expect_int_eq(pprof_agent_profile_remove(p, NULL), 0);

    /* The per-stack counter follows the keys: one stack, 0 keys now. */
    long total = 0;
    for (struct stack_entry *e = stack_table_first(custom_profile_stacks(p));
         e; e = e->next_all) {
        expect_true(pcs_of(e) != 0);
        total += stack_entry_value(e, 0);
    }
    expect_int_eq(total, 0);
    expect_int_eq(pprof_agent_profile_add(NULL, (void *)1, 0), -EINVAL);
}

/* A custom profile's adds cannot build the unwind tables (they may run
 * inside the host's allocator), so making the profile ends their deferral:
 * with PPROF_ADDR=off nothing else would, and every add walked each frame
 * through its call-frame information. */
TEST(custom_profile_ends_the_tables_deferral)
{
    stack_init();
    cfi_tables_defer();
    expect_true(cfi_current == NULL);
    pprof_profile *p = pprof_agent_profile_new("unit.tables");
    assert_true(p != NULL);
    expect_true(cfi_current != NULL);
    uint64_t before = cfi_walk_counters.no_table;
    expect_int_eq(pprof_agent_profile_add(p, (void *)1, 0), 0);
    expect_true(cfi_walk_counters.no_table == before);
}

int main(void)
{
    return run_tests(custom_profile_ends_the_tables_deferral,
                     labels_intern_by_content, labels_limits, custom_names,
                     custom_keys_exact, NULL);
}
