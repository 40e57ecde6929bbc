/*
 * encoder/ turns a snapshot of the agent's tables into bytes: the protobuf
 * wire writer (pb.c), the profile.proto builder (profile.c), the glue that
 * turns raw stacks into symbolized locations (stacks.c), gzip (gzip.c) and
 * the legacy text forms (text.c).
 *
 * Everything here runs on the agent's own threads (HTTP workers), never in a
 * signal handler and never inside an interposed call: it may allocate (the
 * caller's thread has the agent's reentrancy flag set, so its allocations go
 * straight to the host's allocator and are never sampled).
 */
#ifndef PPROF_ENCODER_H
#define PPROF_ENCODER_H

#include <stddef.h>
#include <stdint.h>

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

/* Appends n bytes. Not async-signal-safe. */
void pbuf_append(struct pbuf *b, const void *p, size_t n);
/* Appends a NUL-terminated string without its NUL. Not async-signal-safe. */
void pbuf_puts(struct pbuf *b, const char *s);
/* Appends printf-style text. Not async-signal-safe. */
void pbuf_printf(struct pbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Frees the storage and resets the buffer to empty. Not async-signal-safe. */
void pbuf_free(struct pbuf *b);

/* ---- protobuf wire writer (pb.c) ---------------------------------------- */

/* Appends a base-128 varint. Not async-signal-safe. */
void pb_varint(struct pbuf *b, uint64_t v);
/* Appends field `field` as a varint; skipped when v is 0 (proto3 default).
 * Negative int64 values are written as 10-byte two's complement varints.
 * Not async-signal-safe. */
void pb_uint64(struct pbuf *b, int field, uint64_t v);
void pb_int64(struct pbuf *b, int field, int64_t v);
void pb_bool(struct pbuf *b, int field, int v);
/* Appends a length-delimited field (always written, even when empty, so
 * string_table[0] == "" survives). Not async-signal-safe. */
void pb_bytes(struct pbuf *b, int field, const void *p, size_t n);
/* Packed repeated fields; nothing is written for n == 0.
 * Not async-signal-safe. */
void pb_packed_uint64(struct pbuf *b, int field, const uint64_t *v, size_t n);
void pb_packed_int64(struct pbuf *b, int field, const int64_t *v, size_t n);
/* Nested message: pb_begin() returns a mark; the body is written after it;
 * pb_end() moves the body right and puts its length varint in front.
 * Not async-signal-safe. */
size_t pb_begin(struct pbuf *b, int field);
void pb_end(struct pbuf *b, size_t mark);

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

/* Creates an empty profile. Returns NULL when out of memory.
 * Not async-signal-safe. */
struct profile *profile_new(void);
/* Frees a profile and everything it owns. Not async-signal-safe. */
void profile_free(struct profile *p);

/* Interns s in the string table and returns its index; "" and NULL are 0.
 * Not async-signal-safe. */
int64_t profile_string(struct profile *p, const char *s);

/* Header fields. Strings are copied. Not async-signal-safe. */
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
 * or NULL. Returns the id, 0 when out of memory. Not async-signal-safe. */
uint64_t profile_mapping(struct profile *p, uint64_t start, uint64_t limit,
                         uint64_t offset, const char *filename,
                         const char *build_id);
/* Sets PROFILE_HAS_* flags on a mapping. Not async-signal-safe. */
void profile_mapping_flags(struct profile *p, uint64_t mapping_id, int flags);

/* Returns the id of the function with these names, file and start line,
 * adding it if it is new (ids 1..N in order of first use).
 * Not async-signal-safe. */
uint64_t profile_function(struct profile *p, const char *name,
                          const char *system_name, const char *filename,
                          int64_t start_line);

/* Returns the id of the location at `address` in `mapping_id` (0: none),
 * adding it with these lines (innermost inlined first) if the address is
 * new; an existing location keeps its first lines. Address 0 never
 * deduplicates (pseudo frames). Not async-signal-safe. */
uint64_t profile_location(struct profile *p, uint64_t mapping_id,
                          uint64_t address, const struct profile_line *lines,
                          size_t nlines);
/* Looks up an existing location by address; 0 when absent.
 * Not async-signal-safe. */
uint64_t profile_find_location(struct profile *p, uint64_t address);

/* Adds a sample: location ids leaf first, exactly one value per sample
 * type, labels copied. Samples are not merged. Not async-signal-safe. */
void profile_sample(struct profile *p, const uint64_t *location_ids,
                    size_t nlocs, const int64_t *values, size_t nvalues,
                    const struct profile_label *labels, size_t nlabels);

/* Serializes the profile as an uncompressed profile.proto message into out.
 * Returns 0 or -ENOMEM. Not async-signal-safe. */
int profile_serialize(struct profile *p, struct pbuf *out);

/* ---- gzip (gzip.c) ------------------------------------------------------- */

/* Compresses in (n bytes) as one gzip member appended to out, at zlib's
 * best-speed level as Go does. Returns 0, -ENOMEM or -EIO.
 * Not async-signal-safe. */
int gzip_compress(const void *in, size_t n, struct pbuf *out);
/* Appends the decompressed bytes of in (one or more gzip members) to out,
 * stopping with -EFBIG past max bytes of output (a bound against a hostile
 * or runaway input). Returns 0, -ENOMEM, -EFBIG or -EINVAL (not gzip, or
 * truncated). Not async-signal-safe. */
int gzip_decompress(const void *in, size_t n, size_t max, struct pbuf *out);

/* Serializes and gzips in one step. Returns 0 or -errno.
 * Not async-signal-safe. */
int profile_write_gzip(struct profile *p, struct pbuf *out);


/* ---- count profiles (count.c): threadcreate, goroutine, custom ------------ */

/* One distinct stack and how many entries share it. */
struct count_record {
    const uintptr_t *pcs; /* leaf first, location addresses */
    int depth;
    int64_t count;
    uint32_t labels; /* label set id (agent/labels.h) as string labels; 0 */
};

/* Encodes a count profile as Go does (sample type and period type
 * "<name>/count", period 1) into a gzipped proto. duration_nanos is set for
 * deltas, 0 otherwise. Returns 0 or -errno. Not async-signal-safe. */
int count_profile_proto(const char *name, const struct count_record *recs,
                        size_t n, int64_t time_nanos, int64_t duration_nanos,
                        struct pbuf *out);
/* The debug=1 text form: "<name> profile: total N", then per record
 * "<count> @ 0x... 0x..." and its symbolized frames, most frequent first.
 * Returns 0 or -errno. Not async-signal-safe. */
int count_profile_text(const char *name, const struct count_record *recs,
                       size_t n, struct pbuf *out);

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
 * proto. Returns 0 or -errno. Not async-signal-safe. */
int wall_profile_proto(const struct wall_record *recs, size_t n,
                       int64_t period_ns, int64_t time_nanos,
                       int64_t duration_nanos, const char *comment,
                       struct pbuf *out);

/* ---- contention profiles (contention.c): block, mutex --------------------- */

/* One distinct stack with its (already scaled) contentions and delay. */
struct contention_record {
    const uintptr_t *pcs; /* leaf first, location addresses */
    int depth;
    int64_t count;
    int64_t delay; /* ns */
};

/* Encodes a block or mutex profile as Go does (contentions/count,
 * delay/nanoseconds, period type contentions/count, period 1) into a gzipped
 * proto. Returns 0 or -errno. Not async-signal-safe. */
int contention_profile_proto(const struct contention_record *recs, size_t n,
                             int64_t time_nanos, int64_t duration_nanos,
                             struct pbuf *out);
/* 1 when the waker's stack pcs (leaf first) released a lock, 0 when it
 * signalled a condition (notify, one-time initialization, channel...),
 * judged from the innermost frame whose function names either; 1 when none
 * does (wake_kind.c). Takes the symbolizer's lock: call it outside
 * stacks_begin()..stacks_end(). Not async-signal-safe. */
int contention_wake_is_lock(const uintptr_t *pcs, int depth);

/* Go's debug=1 text: "--- <kind>:", cycles/second (ns here), "sampling
 * period=N" when sampling_period > 0, then "<delay> <count> @ ..." records,
 * largest delay first. Returns 0 or -errno. Not async-signal-safe. */
int contention_profile_text(const char *kind, long sampling_period,
                            const struct contention_record *recs, size_t n,
                            struct pbuf *out);

/* ---- threads dump (threads.c): goroutine?debug=2 ------------------------- */

struct thread_dump;
/* Every thread of d as Go's full goroutine dump: "goroutine <tid> "<name>"
 * [<state>, <syscall>]:", labels, then "func(...)\n\tfile:line +0xOFF" per
 * frame. Returns 0 or -ENOMEM. Not async-signal-safe. */
int threads_dump_text(const struct thread_dump *d, struct pbuf *out);

/* ---- raw stacks to symbolized locations (stacks.c) ------------------------ */

struct stack_encoder;
/* Locks the symbolizer, refreshes it, adds every mapping to p (main
 * executable first). NULL on OOM. Not async-signal-safe. */
struct stack_encoder *stacks_begin(struct profile *p);
/* Converts n stack addresses (leaf first; already "location addresses":
 * callers' return address minus one, leaf exact; values < FRAME_PSEUDO_MAX
 * are pseudo frames named by symbols_pseudo_name) into location ids written
 * to ids[]; returns the number written. Each distinct address gets one
 * location with its symbolized Lines (inline frames innermost first),
 * function name demangled, system_name mangled, filename, start_line.
 * Not async-signal-safe. */
size_t stacks_locations(struct stack_encoder *se, const uintptr_t *pcs,
                        size_t n, uint64_t *ids);
/* 1 when frame i (0 = leaf) of a stack, at pc, is one of the agent's own
 * frames between host frames, which no form of a profile shows (the
 * proto's locations and the debug=1 text leave out the same frames).
 * Async-signal-safe. Does not allocate. */
int stacks_hidden(uintptr_t pc, size_t i);

/* Formats one frame the Go legacy text way into out:
 * "#\t0x<pc>\t<func>+0x<off>\t<file>:<line>" or "#\t0x<pc>" when unknown
 * (one line per inlined frame, each ending in \n). Not async-signal-safe. */
void stacks_describe(struct stack_encoder *se, uintptr_t pc, struct pbuf *out);
/* Sets has_functions/has_filenames/has_line_numbers/has_inline_frames on
 * each mapping whose every location got them (pprof-format.md 4.6),
 * unlocks, frees. Not async-signal-safe. */
void stacks_end(struct stack_encoder *se);

/* ---- heap profiles (heap.c): heap, allocs ------------------------------- */

/* One heap bucket: a stack and a requested size, with raw sampled counts. */
struct heap_record {
    const uintptr_t *pcs; /* leaf first, location addresses */
    int depth;
    int64_t size;          /* requested bytes of each allocation */
    int64_t alloc_objects; /* sampled allocations */
    int64_t free_objects;  /* of which freed */
    uint32_t labels;       /* label set id (agent/labels.h), 0: none */
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
 * room for n * (HEAP_AGE_BUCKETS + 1). Returns the number of records.
 * Not async-signal-safe. */
size_t heap_records_by_age(const struct heap_record *in, size_t n,
                           struct heap_live *live, size_t nlive,
                           int64_t now_ns, struct heap_record *out);

/* Records of the live samples at least min_age_ns old at now_ns, one per
 * (bucket, age bucket) with alloc_objects = in-use objects, or one per
 * bucket without age when by_age is 0. live is sorted in place. out needs
 * room for nlive records. Returns the number of records.
 * Not async-signal-safe. */
size_t heap_records_min_age(struct heap_live *live, size_t nlive,
                            int64_t now_ns, int64_t min_age_ns, int by_age,
                            struct heap_record *out);

/* later -= earlier, record by record matched on bucket (both as
 * heap_records_min_age gives them with by_age 0); records of earlier
 * missing from later are appended negated (later needs room for
 * nlater + nearlier). Returns the new number of records of later.
 * Not async-signal-safe. */
size_t heap_records_subtract(struct heap_record *later, size_t nlater,
                             const struct heap_record *earlier,
                             size_t nearlier);

/* Turns a snapshot of the heap buckets (agent/heap.h) into records, written
 * to out (room for snap->n): the size and labels come from each bucket's
 * key; buckets with nothing in them are left out. In a full profile
 * (delta == 0) a free counted after its allocation was read is not allowed
 * to show as a negative in-use count. Returns the number of records.
 * Not async-signal-safe. */
struct stack_snapshot;
size_t heap_records_from_snapshot(const struct stack_snapshot *snap,
                                  int delta, struct heap_record *out);

/* The factor that turns a raw count of allocations of size bytes into an
 * unbiased estimate, when each is sampled with probability
 * 1 - exp(-(size + 1) / rate); 1 when rate <= 1. Not async-signal-safe. */
double heap_scale(int64_t size, long rate);

/* Encodes Go's heap profile (alloc_objects/count, alloc_space/bytes,
 * inuse_objects/count, inuse_space/bytes; period type space/bytes, period
 * rate), unsampled per bucket, with the numeric label "bytes". default_type
 * is NULL for heap (pprof then shows the last type, inuse_space) or
 * "alloc_space" for allocs. comment, when not NULL, is added as the
 * profile's comment. Returns 0 or -errno. Not async-signal-safe. */
int heap_profile_proto(const struct heap_record *recs, size_t n, long rate,
                       const char *default_type, int64_t time_nanos,
                       int64_t duration_nanos, const char *comment,
                       struct pbuf *out);
/* Go's debug=1 text: "heap profile: ... @ heap/<2*rate>" and one record
 * per bucket with raw counts, largest in-use bytes first; trailer lines
 * (each starting with "# ") are appended. Returns 0 or -errno.
 * Not async-signal-safe. */
int heap_profile_text(const struct heap_record *recs, size_t n, long rate,
                      const char *trailer, struct pbuf *out);

/* ---- /debug/memory (memory.c) -------------------------------------------- */

struct memory_report;
/* Writes the report as JSON: "rss", "parts" (non-overlapping bytes that
 * sum to rss), "parts_sum", and the details beside them ("sampled_heap"
 * with its standard error, "allocator", "smaps", "agent"). Returns 0 or
 * -ENOMEM. Not async-signal-safe. */
int memory_report_json(const struct memory_report *r, struct pbuf *b);

/* ---- CPU profile (cpu.c) ------------------------------------------------- */

struct cpu_agg;
struct cpu_sample;
/* An empty aggregate of CPU samples; NULL when out of memory.
 * Not async-signal-safe. */
struct cpu_agg *cpu_agg_new(void);
void cpu_agg_free(struct cpu_agg *a);
/* Adds one drained sample (arg is the struct cpu_agg *); the shape of a
 * cpu_ringbuf_drain() callback. Not async-signal-safe. */
void cpu_agg_add(const struct cpu_sample *s, void *arg);
/* Sum of the weights added so far. Not async-signal-safe. */
int64_t cpu_agg_total(const struct cpu_agg *a);
/* Encodes Go's CPU profile (samples/count, cpu/nanoseconds) with a
 * "thread" label per sample (name_of(tid) gives the name) and lost
 * samples under a [lost samples] frame, gzipped into out. Returns 0 or
 * -errno. Not async-signal-safe. */
int cpu_profile_proto(const struct cpu_agg *a, int64_t period_ns,
                      int64_t time_nanos, int64_t duration_nanos,
                      int64_t lost, void (*name_of)(int, char *, size_t),
                      const char *comment, struct pbuf *out);

/* ---- labels (labels.c) ---------------------------------------------------- */

/* Appends the pairs of label set id (agent/labels.h; 0: none) to out as
 * string labels (room for LABELS_MAX_PAIRS) and returns how many.
 * Not async-signal-safe. */
size_t labels_to_profile(uint32_t id, struct profile_label *out);
/* Writes prefix and Go's text form of label set id, {"k":"v", ...}, and a
 * newline; nothing when the id has no set. Returns 1 when written.
 * Not async-signal-safe. */
int labels_put_text(struct pbuf *out, const char *prefix, uint32_t id);
/* Writes s Go-quoted: quotes and backslashes escaped, control bytes as
 * \xNN. Not async-signal-safe. */
void labels_put_quoted(struct pbuf *out, const char *s);

#endif
