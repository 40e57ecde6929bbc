/*
 * encoder/ turns a snapshot of the agent's tables into bytes: the protobuf
 * wire writer (pb.c), the profile.proto builder (profile.c), the glue that
 * turns raw stacks into symbolized locations (stacks.c), gzip (gzip.c),
 * and one writer per profile kind, Go's
 * writeHeap(w, debug) shape: heap_write, contention_write, count_write,
 * goroutine_write, cpu_write take the kind's snapshot or records and a
 * struct write_options {debug, time, duration} and return the gzipped
 * proto or the debug=1 text. The stack-table kinds share one record type
 * and its two loops (stack_records.c). HTTP handlers, the dumps and
 * /debug/stats all call these writers; nothing else builds a profile.
 *
 * Everything here runs on the agent's own threads (HTTP workers), never in a
 * signal handler and never inside an interposed call: it may allocate (the
 * caller's thread has the agent's reentrancy flag set, so its allocations go
 * straight to the host's allocator and are never sampled). So no function
 * declared here is async-signal-safe unless its comment says it is.
 */
#ifndef PPROF_ENCODER_H
#define PPROF_ENCODER_H

#include "agent/core/hash.h"
#include "agent/stacks/stack_table.h"

#include <stddef.h>
#include <stdint.h>

/* -1, 0 or 1 as a is below, equal to or above b: one step of the
 * encoders' sort orders. */
#define ORDER(a, b) (((a) > (b)) - ((a) < (b)))

/* ---- growable byte buffer ---------------------------------------------- */

/*
 * A byte buffer that grows as needed. A failed allocation sets `oom` and
 * turns every later append into a no-op, so writers check once at the end.
 */
struct pbuf {
    uint8_t *data;
    size_t len;
    size_t cap;
    int oom;
};

/* Appends n bytes. */
void pbuf_append(struct pbuf *b, const void *p, size_t n);
/* Appends a NUL-terminated string without its NUL. */
void pbuf_puts(struct pbuf *b, const char *s);
/* Appends printf-style text. */
void pbuf_printf(struct pbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Frees the storage and resets the buffer to empty. */
void pbuf_free(struct pbuf *b);

/* ---- protobuf wire writer (pb.c) ---------------------------------------- */

/* Wire types of a field's tag (the writer uses varint, 64-bit and
 * length-delimited; the reader, decode.c, skips all four). */
enum {
    PB_WIRE_VARINT = 0,
    PB_WIRE_64 = 1,
    PB_WIRE_LEN = 2,
    PB_WIRE_32 = 5,
};

/* Appends a base-128 varint. */
void pb_varint(struct pbuf *b, uint64_t v);
/* Appends field `field` as a varint; skipped when v is 0 (proto3 default).
 * Negative int64 values are written as 10-byte two's complement varints. */
void pb_uint64(struct pbuf *b, int field, uint64_t v);
void pb_int64(struct pbuf *b, int field, int64_t v);
void pb_bool(struct pbuf *b, int field, int v);
/* Appends field `field` as a little-endian fixed64; skipped when v is 0. */
void pb_fixed64(struct pbuf *b, int field, uint64_t v);
/* Appends a length-delimited field (always written, even when empty, so
 * string_table[0] == "" survives). */
void pb_bytes(struct pbuf *b, int field, const void *p, size_t n);
/* Packed repeated fields; nothing is written for n == 0. */
void pb_packed_uint64(struct pbuf *b, int field, const uint64_t *v, size_t n);
void pb_packed_int64(struct pbuf *b, int field, const int64_t *v, size_t n);
/* Nested message: pb_begin() returns a mark; the body is written after it;
 * pb_end() moves the body right and puts its length varint in front. */
size_t pb_begin(struct pbuf *b, int field);
void pb_end(struct pbuf *b, size_t mark);
/* Fields first..first+n-1 as varints v[0..n-1] (zeros skipped, negative
 * int64 values passed as their 64-bit pattern, booleans as 0 or 1): a run
 * of scalar fields numbered in a row, as most of profile.proto's and
 * OTLP's messages are. */
void pb_varints(struct pbuf *b, int first, const uint64_t *v, size_t n);
/* Nested message whose fields are 1..n, written by pb_varints. */
void pb_varints_message(struct pbuf *b, int field, const uint64_t *v,
                        size_t n);

/* ---- profile.proto builder (profile.c) ----------------------------------- */

struct profile;

struct profile_label {
    const char *key;      /* required, non-empty */
    const char *str;      /* string label, or NULL for a numeric one */
    int64_t num;          /* used when str == NULL */
    const char *num_unit; /* optional, with num only */
};

struct profile_line {
    uint64_t function_id;
    int64_t line;
};

/* Mapping flags for profile_mapping_flags(). */
#define PROFILE_HAS_FUNCTIONS 1
#define PROFILE_HAS_FILENAMES 2
#define PROFILE_HAS_LINE_NUMBERS 4
#define PROFILE_HAS_INLINE_FRAMES 8

/* Creates an empty profile. Returns NULL when out of memory. */
struct profile *profile_new(void);
/* Frees a profile and everything it owns. */
void profile_free(struct profile *p);
/* A profile sampled in time (CPU, wall): sample types samples/count and
 * <clock>/nanoseconds, one sample every period_ns of <clock>, covering
 * [time_nanos, time_nanos + duration_nanos), with comment when it is not
 * empty. NULL when out of memory. */
struct profile *profile_timed(const char *clock, int64_t period_ns,
                              int64_t time_nanos, int64_t duration_nanos,
                              const char *comment);

/* Interns s in the string table and returns its index; "" and NULL are 0. */
int64_t profile_string(struct profile *p, const char *s);

/* Header fields. Strings are copied. */
void profile_sample_type(struct profile *p, const char *type, const char *unit);
void profile_period(struct profile *p, const char *type, const char *unit,
                    int64_t period);
void profile_time(struct profile *p, int64_t time_nanos,
                  int64_t duration_nanos);
void profile_default_sample_type(struct profile *p, const char *type);
void profile_comment(struct profile *p, const char *text);
void profile_drop_frames(struct profile *p, const char *regex);

/* Adds a mapping; ids are 1..N in the order of the calls. Mappings are not
 * deduplicated (the caller adds each object once). build_id is lowercase hex
 * or NULL. Returns the id, 0 when out of memory. */
uint64_t profile_mapping(struct profile *p, uint64_t start, uint64_t limit,
                         uint64_t offset, const char *filename,
                         const char *build_id);
/* Sets PROFILE_HAS_* flags on a mapping. */
void profile_mapping_flags(struct profile *p, uint64_t mapping_id, int flags);

/* Returns the id of the function with these names, file and start line,
 * adding it if it is new (ids 1..N in order of first use). */
uint64_t profile_function(struct profile *p, const char *name,
                          const char *system_name, const char *filename,
                          int64_t start_line);

/* Returns the id of the location at `address` in `mapping_id` (0: none),
 * adding it with these lines (innermost inlined first) if the address is
 * new; an existing location keeps its first lines. Address 0 never
 * deduplicates (pseudo frames). */
uint64_t profile_location(struct profile *p, uint64_t mapping_id,
                          uint64_t address, const struct profile_line *lines,
                          size_t nlines);
/* Looks up an existing location by address; 0 when absent. */
uint64_t profile_find_location(struct profile *p, uint64_t address);

/* Adds a sample: location ids leaf first, exactly one value per sample
 * type, labels copied. Samples are not merged. */
void profile_sample(struct profile *p, const uint64_t *location_ids,
                    size_t nlocs, const int64_t *values, size_t nvalues,
                    const struct profile_label *labels, size_t nlabels);

/* Serializes the profile as an uncompressed profile.proto message into out.
 * Returns 0 or -ENOMEM. */
int profile_serialize(struct profile *p, struct pbuf *out);

/* ---- gzip (gzip.c) ------------------------------------------------------- */

/* Compresses in (n bytes) as one gzip member appended to out, at zlib's
 * best-speed level as Go does. Returns 0, -ENOMEM or -EIO. */
int gzip_compress(const void *in, size_t n, struct pbuf *out);
/* Appends the decompressed bytes of in (one or more gzip members) to out,
 * stopping with -EFBIG past max bytes of output (a bound against a hostile
 * or runaway input). Returns 0, -ENOMEM, -EFBIG or -EINVAL (not gzip, or
 * truncated). */
int gzip_decompress(const void *in, size_t n, size_t max, struct pbuf *out);

/* Serializes and gzips in one step. Returns 0 or -errno. */
int profile_write_gzip(struct profile *p, struct pbuf *out);


/* ---- what every writer is asked ------------------------------------------ */

/* A profile request, as Go's handlers read it, for the writers below. */
struct write_options {
    int debug;              /* 0: gzipped proto; 1 (or more): legacy text */
    int64_t time_nanos;     /* when the profile (a delta's end) was taken */
    int64_t duration_nanos; /* a delta's length; 0 for a full profile */
};

/* ---- stack records (stack_records.c) ------------------------------------- */

#define STACK_RECORD_VALUES 4

/* One sample of a stack-table profile: a stack, its values (one per sample
 * type, unused ones 0) and its labels. A record whose values are all 0 is
 * left out of both forms. */
struct stack_record {
    const uintptr_t *pcs; /* leaf first, location addresses */
    int depth;
    int64_t values[STACK_RECORD_VALUES];
    uint32_t labels;  /* label set id (agent/core/labels.h) as string labels; 0 */
    int64_t bytes;    /* numeric label "bytes" when not 0 (heap) */
    const char *age;  /* string label "age" when not NULL (heap) */
};

/* What a kind's debug=1 text does differently: the order of its records
 * (largest values[keys[0]] first, then values[keys[1]]...; with tiebreak,
 * then shorter stacks, lower addresses, lower label set ids; otherwise
 * ties keep their order), the values written before " @ 0x...", and
 * whether a "# labels: {...}" line follows. */
struct stack_text_form {
    int keys[STACK_RECORD_VALUES];
    int nkeys;
    int tiebreak;
    void (*headline)(const struct stack_record *r, struct pbuf *out);
    int labels;
};

/* Adds every record to p (its sample types already set, nvalues of them)
 * with its labels ("bytes", "age", then the label set), symbolizing the
 * stacks, then appends p gzipped to out. p stays the caller's. Returns 0
 * or -errno. */
int stack_records_proto(struct profile *p, const struct stack_record *recs,
                        size_t n, size_t nvalues, struct pbuf *out);
/* Appends the records as Go's legacy text, sorted by form->order: per
 * record the headline, " @" and the return addresses, the labels line if
 * asked, one "#	0x..." line per symbolized frame and an empty line.
 * Returns 0 or -errno. */
int stack_records_text(const struct stack_record *recs, size_t n,
                       const struct stack_text_form *form, struct pbuf *out);

/* ---- count profiles (count.c): threadcreate, custom ---------------------- */

/* Records of a count table's snapshot (one counter per stack), written to
 * out (room for snap->n), leaving out empty stacks. Returns how many. */
struct stack_snapshot;
size_t count_records_from_snapshot(const struct stack_snapshot *snap,
                                   struct stack_record *out);
/* Writes a count profile as Go does: proto with sample type and period
 * type "<name>/count", period 1 (values[0] is the count); or debug=1 text
 * "<name> profile: total N" and "<count> @ ..." records, most frequent
 * first. Returns 0 or -errno. */
int count_write(const char *name, const struct stack_record *recs, size_t n,
                const struct write_options *o, struct pbuf *out);

/* ---- goroutine profile (goroutine.c) ------------------------------------- */

/* The host's threads now: grouped by (stack, labels) for debug 0 and 1,
 * or the full dump for debug >= 2. */
struct goroutine_snapshot {
    int debug;
    struct goroutine_group *groups;
    size_t n;
    struct thread_dump *dump; /* debug >= 2 */
};
/* Takes the threads now (agent/threads.c). Returns 0 or -errno. */
int goroutine_take(struct goroutine_snapshot *s, int debug);
/* later -= earlier, group by group (zero groups dropped, groups only in
 * earlier negated). Returns 0 or -ENOMEM. */
int goroutine_subtract(struct goroutine_snapshot *later,
                       const struct goroutine_snapshot *earlier);
void goroutine_free(struct goroutine_snapshot *s);
/* Writes Go's goroutine profile: proto goroutine/count, debug=1 text, or
 * with debug >= 2 every thread as Go's full dump. Returns 0 or -errno. */
int goroutine_write(const struct goroutine_snapshot *s,
                    const struct write_options *o, struct pbuf *out);

/* ---- wall-clock profile (wall.c) ----------------------------------------- */

/* One distinct (stack, thread name, state, system call) and the samples
 * and wall time charged to it. */
struct wall_record {
    const uintptr_t *pcs; /* leaf first, location addresses */
    int depth;
    int64_t count;
    int64_t wall_ns;
    const char *thread;  /* the thread's name */
    const char *state;   /* "running", "runnable", "sleeping", "disk" */
    const char *syscall; /* the call it is blocked in, or NULL */
};

/* Encodes the wall profile (sample types samples/count and
 * wall/nanoseconds, the default; period period_ns of wall) into a gzipped
 * proto. Returns 0 or -errno. */
int wall_profile_proto(const struct wall_record *recs, size_t n,
                       int64_t period_ns, int64_t time_nanos,
                       int64_t duration_nanos, const char *comment,
                       struct pbuf *out);

/* The wall profile of a run (agent/wall/wall.h: wall_run) from its groups, with
 * the run's figures as its comment. Returns 0 or -errno. */
struct wall_agg;
struct wall_run;
int wall_write(const struct wall_agg *agg, const struct wall_run *run,
               struct pbuf *out);

/* ---- contention profiles (contention.c): block, mutex --------------------- */

/* Writes a block (is_mutex 0) or mutex profile from a snapshot of its table
 * (agent/locks/contention.h) as Go does: counts de-biased from the recorder's
 * fixed point (block), futex wakes that signalled a condition left out
 * (mutex), and, as Go, mutex values multiplied by the sampling fraction in
 * the proto only. Proto: contentions/count, delay/nanoseconds, period type
 * contentions/count, period 1. Text: "--- contention:" or "--- mutex:",
 * cycles/second, "sampling period=N" for mutex, then "<delay> <count> @"
 * records, largest delay first. Returns 0 or -errno. */
int contention_write(int is_mutex, const struct stack_snapshot *snap,
                     const struct write_options *o, struct pbuf *out);
/* 1 when the waker's stack pcs (leaf first) released a lock, 0 when it
 * signalled a condition (notify, one-time initialization, channel...),
 * judged from the innermost frame whose function names either; 1 when none
 * does (wake_kind.c). Takes the symbolizer's lock: call it outside
 * stacks_begin()..stacks_end(). */
int contention_wake_is_lock(const uintptr_t *pcs, int depth);

/* ---- threads dump (threads.c): goroutine?debug=2 ------------------------- */

struct thread_dump;
/* Every thread of d as Go's full goroutine dump: "goroutine <tid> "<name>"
 * [<state>, <syscall>]:", labels, then "func(...)\n\tfile:line +0xOFF" per
 * frame. Returns 0 or -ENOMEM. */
int threads_dump_text(const struct thread_dump *d, struct pbuf *out);

/* ---- deadlock report (deadlock.c) ----------------------------------------- */

struct deadlock_report;
/* Writes the cycles and stuck chains of r (agent/locks/deadlock.h): debug=1 text,
 * or a gzipped profile with one sample per thread (threads/count,
 * blocked/nanoseconds) labelled thread, group, waits_for, held_by,
 * blocked_seconds (blocked_in for a chain's holder). Returns 0 or -errno. */
int deadlock_write(const struct deadlock_report *r,
                   const struct write_options *o, struct pbuf *out);

/* ---- raw stacks to symbolized locations (stacks.c) ------------------------ */

struct stack_encoder;
/* Locks the symbolizer, refreshes it, adds every mapping to p (main
 * executable first). NULL on OOM. */
struct stack_encoder *stacks_begin(struct profile *p);
/* For the calling thread's next profiles (on: 1) or again (0): locations
 * with addresses and mappings only, no function names, which pprof
 * resolves later from the binaries the mappings name (by build ID). What
 * the memory-limit dump writes: symbolizing costs time and memory (the
 * debug information read) just when the process is short of it. */
void stacks_addresses_only(int on);
/* Converts n stack addresses (leaf first; already "location addresses":
 * callers' return address minus one, leaf exact; values < FRAME_PSEUDO_MAX
 * are pseudo frames named by symbols_pseudo_name) into location ids written
 * to ids[]; returns the number written. Each distinct address gets one
 * location with its symbolized Lines (inline frames innermost first),
 * function name demangled, system_name mangled, filename, start_line. */
size_t stacks_locations(struct stack_encoder *se, const uintptr_t *pcs,
                        size_t n, uint64_t *ids);
/* 1 when frame i (0 = leaf) of a stack, at pc, is one of the agent's own
 * frames between host frames, which no form of a profile shows (the
 * proto's locations and the debug=1 text leave out the same frames).
 * Async-signal-safe. Does not allocate. */
int stacks_hidden(uintptr_t pc, size_t i);

/* Formats one frame the Go legacy text way into out:
 * "#\t0x<pc>\t<func>+0x<off>\t<file>:<line>" or "#\t0x<pc>" when unknown
 * (one line per inlined frame, each ending in \n). Call it between
 * stacks_begin() and stacks_end(), or stacks_text_begin() and
 * stacks_text_end(). */
void stacks_describe(uintptr_t pc, struct pbuf *out);
/* Lock and refresh the symbolizer for stacks_describe() alone (a text form
 * has no profile to add mappings to), then unlock it. */
void stacks_text_begin(void);
void stacks_text_end(void);
/* Sets has_functions/has_filenames/has_line_numbers/has_inline_frames on
 * each mapping whose every location got them (pprof-format.md 4.6),
 * unlocks, frees. */
void stacks_end(struct stack_encoder *se);

/* ---- heap profiles (heap.c): heap, allocs ------------------------------- */

/* One heap bucket: a stack and a requested size, with raw sampled counts. */
struct heap_record {
    const uintptr_t *pcs; /* leaf first, location addresses */
    int depth;
    int64_t size;          /* requested bytes of each allocation */
    int64_t alloc_objects; /* sampled allocations */
    int64_t free_objects;  /* of which freed */
    uint32_t labels;       /* label set id (agent/core/labels.h), 0: none */
    const char *age;       /* age bucket label of live samples, or NULL */
    const void *bucket;    /* the stack_entry, to match records */
};

/* Age buckets of live samples, the values of the "age" label: "0-1m",
 * "1m-10m", "10m-1h", "1h+" (the lower bound of each is inclusive). */
#define HEAP_AGE_BUCKETS 4
/* The age label for a sample age_ns old. Does not allocate. */
const char *heap_age_label(int64_t age_ns);

struct heap_live;
/* Splits full-profile records (from heap_records_from_snapshot, taken
 * after the copy of the live samples) by the age of their live samples:
 * in (n records) becomes, per bucket, one record without an age holding
 * every allocation and nothing in use (all counted freed), and one record
 * per age bucket with live samples holding only those in use (no
 * allocation, free_objects = -in use). alloc_* series so stay cumulative
 * and in-use ones carry the age. live
 * (nlive, as heap_table_live() gives it) is sorted in place. out needs
 * room for n * (HEAP_AGE_BUCKETS + 1). Returns the number of records. */
size_t heap_records_by_age(const struct heap_record *in, size_t n,
                           struct heap_live *live, size_t nlive,
                           int64_t now_ns, struct heap_record *out);

/* Records of the live samples at least min_age_ns old at now_ns, one per
 * (bucket, age bucket) with alloc_objects = in-use objects, or one per
 * bucket without age when by_age is 0. live is sorted in place. out needs
 * room for nlive records. Returns the number of records. */
size_t heap_records_min_age(struct heap_live *live, size_t nlive,
                            int64_t now_ns, int64_t min_age_ns, int by_age,
                            struct heap_record *out);

/* later -= earlier, record by record matched on bucket (both as
 * heap_records_min_age gives them with by_age 0); records of earlier
 * missing from later are appended negated (later needs room for
 * nlater + nearlier). Returns the new number of records of later. */
size_t heap_records_subtract(struct heap_record *later, size_t nlater,
                             const struct heap_record *earlier,
                             size_t nearlier);

/* Turns a snapshot of the heap buckets (agent/heap/heap.h) into records, written
 * to out (room for snap->n): the size and labels come from each bucket's
 * key; buckets with nothing in them are left out. In a full profile
 * (delta == 0) a free counted after its allocation was read is not allowed
 * to show as a negative in-use count. Returns the number of records. */
struct stack_snapshot;
size_t heap_records_from_snapshot(const struct stack_snapshot *snap,
                                  int delta, struct heap_record *out);

/* Records of a heap snapshot (agent/heap/heap.h) into *out (malloc'd, the
 * caller frees it): heap_records_from_snapshot(), then, when by_age, split
 * by the age of the live samples (heap_records_by_age, live sorted in
 * place). Returns 0 or -ENOMEM. */
int heap_records_of(const struct stack_snapshot *snap, int delta, int by_age,
                    struct heap_live *live, size_t nlive, int64_t now_ns,
                    struct heap_record **out, size_t *n);
/* Takes the heap now, as a full profile shows it: the live samples (when
 * by_age) then the bucket counters into snap, and their records into *out.
 * The caller frees *out and snap (the records point into it). Returns 0
 * or -ENOMEM. */
int heap_records_take(int by_age, struct heap_record **out, size_t *n,
                      struct stack_snapshot *snap);

/* Records of the live samples at least min_age_ns old now
 * (heap_records_min_age over the table's live copy), into *out (malloc'd,
 * room for a delta's leftovers). Returns 0 or -ENOMEM. */
int heap_records_take_min_age(int64_t min_age_ns, int by_age,
                              struct heap_record **out, size_t *n);
/* *later -= earlier (heap_records_subtract), growing *later for the
 * records only in earlier. Returns 0 or -ENOMEM. */
int heap_records_delta(struct heap_record **later, size_t *nlater,
                       const struct heap_record *earlier, size_t nearlier);
/* The heap at the high-water mark of the in-use estimate (agent/
 * heap_peak.c; reset starts a new period after this copy): the counters
 * into snap, their records into *out (malloc'd; the caller frees both),
 * *time_ns when the peak was reached (0: never), and the peak's figures
 * as words for the comment in extra. Returns 0 or -ENOMEM. */
int heap_records_take_peak(int reset, struct heap_record **out, size_t *n,
                           struct stack_snapshot *snap, int64_t *time_ns,
                           char *extra, size_t extra_size);

/* Writes Go's heap profile "name" (heap, allocs, peak) from records:
 * proto with alloc_objects/count, alloc_space/bytes, inuse_objects/count,
 * inuse_space/bytes (period type space/bytes, period opt_heap_rate),
 * unsampled per bucket, numeric label "bytes", default sample type
 * alloc_space for allocs; or debug=1 text "heap profile: ... @
 * heap/<2*rate>" with raw counts, largest in-use bytes first. The table's
 * statistics and extra (NULL: none) go in the comment or the text's "# "
 * trailer. Returns 0 or -errno. */
int heap_write(const char *name, const struct heap_record *recs, size_t n,
               const char *extra, const struct write_options *o,
               struct pbuf *out);
/* The in-use totals of records as the proto shows them (unsampled, each
 * record rounded as its sample is). Returns 0. */
int heap_totals(const struct heap_record *recs, size_t n, long rate,
                int64_t *inuse_bytes, int64_t *inuse_objects);

/* ---- /debug/memory (memory.c) -------------------------------------------- */

struct memory_report;
/* Writes the report as JSON: "rss", "parts" (non-overlapping bytes that
 * sum to rss), "parts_sum", and the details beside them ("sampled_heap"
 * with its standard error, "allocator", "smaps", "agent"). Returns 0 or
 * -ENOMEM. */
int memory_report_json(const struct memory_report *r, struct pbuf *b);

/* ---- CPU profile (cpu.c) ------------------------------------------------- */

struct cpu_agg;
struct cpu_sample;
/* An empty aggregate of CPU samples; NULL when out of memory. */
struct cpu_agg *cpu_agg_new(void);
void cpu_agg_free(struct cpu_agg *a);
/* Adds one drained sample (arg is the struct cpu_agg *); the shape of a
 * cpu_ringbuf_drain() callback. */
void cpu_agg_add(const struct cpu_sample *s, void *arg);
/* Sum of the weights added so far. */
int64_t cpu_agg_total(const struct cpu_agg *a);
/* Writes Go's CPU profile of the samples in a (samples/count,
 * cpu/nanoseconds, period cpu/nanoseconds) with a "thread" label per
 * sample and lost samples under a [lost samples] frame, gzipped, with the
 * profiler's counters (agent/cpu/cpu.h) in its comment: those of one request,
 * or, with whole_run, of a whole-run profile (the dumps). o gives the
 * start and the length. Returns 0 or -errno. */
int cpu_write(const struct cpu_agg *a, int whole_run,
              const struct write_options *o, struct pbuf *out);

/* ---- labels (labels.c) ---------------------------------------------------- */

/* Appends the pairs of label set id (agent/core/labels.h; 0: none) to out as
 * string labels (room for LABELS_MAX_PAIRS) and returns how many. */
size_t labels_to_profile(uint32_t id, struct profile_label *out);
/* Writes prefix and Go's text form of label set id, {"k":"v", ...}, and a
 * newline; nothing when the id has no set. Returns 1 when written. */
int labels_put_text(struct pbuf *out, const char *prefix, uint32_t id);
/* Writes s Go-quoted: quotes and backslashes escaped, control bytes as
 * \xNN. */
void labels_put_quoted(struct pbuf *out, const char *s);

/* ---- the agent's notes on its last profiles (notes.c) -------------------- */

/* Keeps text as the note of the last profile of kind ("cpu", "wall",
 * "heap", "peak"): the agent's counters, which Go's profiles do not carry. Up to
 * six kinds. */
void notes_set(const char *kind, const char *text);
/* Calls fn with each kind's last note, in the order first set; returns how
 * many. fn runs without the lock. */
size_t notes_each(void (*fn)(void *arg, const char *kind, const char *text),
                  void *arg);
/* ---- the execution trace (encoder/trace.c) ---- */

/* A CPU sample for the trace: thread, time (CLOCK_MONOTONIC ns), stack. */
struct trace_sample {
    uint32_t tid;
    uint32_t depth;
    int64_t t;
    const uintptr_t *pcs;
};

/* The last trace (agent/trace/trace.h, between trace_stop and trace_release)
 * with samples, in Go's execution-trace format, into *out (the caller
 * frees it). Returns 0, or -1 when memory ran out. */
int trace_write(const struct trace_sample *samples, size_t nsamples,
                struct pbuf *out);

#endif
