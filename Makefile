# pprofagent: build, test, benchmark, install.
#
#   make            build build/libpprofagent.so (installs nothing)
#   make deps       install the packages building and testing need
#   make demo       run a demo service under the agent and print a profile
#   make test       install what is missing, build and run every test; ends
#                   with "N passed, N failed"
#   make test-tsan  the unit tests under ThreadSanitizer ($(BUILD)-tsan)
#   make bench      side-by-side cost measurements
#   make install    PREFIX=/usr/local DESTDIR=

PREFIX  ?= /usr/local
DESTDIR ?=
BUILD   ?= build
CC      ?= cc

WARN := -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes \
        -Wmissing-prototypes -Wpointer-arith -Wundef
ifneq ($(CI),)
WARN += -Werror
endif
ifneq ($(WERROR),)
WARN += -Werror
endif

# Every agent object: hidden by default, initial-exec TLS (no __tls_get_addr,
# which can allocate), no builtin malloc folding (gcc would turn malloc+memset
# into calloc inside the calloc interposer), frame pointers kept. Each
# variable in a section of its own, which the link orders by alignment
# (LDFLAGS_AGENT): the small ones (the C library's functions found at load,
# flags, settings) then share a few pages instead of lying between large
# tables, and every page a process touches while the agent loads is a page
# fault in every process it is preloaded into (about five fewer in each
# of a build's processes).
CFLAGS_AGENT := -std=gnu11 -O2 -g -fPIC -fno-omit-frame-pointer \
        -fvisibility=hidden -ftls-model=initial-exec -fdata-sections \
        -fno-builtin-malloc -fno-builtin-calloc -fno-builtin-realloc \
        -fno-builtin-free -D_GNU_SOURCE -pthread -I. $(WARN) $(EXTRA_CFLAGS) \
        $(CPPFLAGS) $(CFLAGS)
# Lazy binding (no -z now): a process binds only the C-library functions it
# calls, instead of the loader looking up all 217 the agent imports in
# every process it is preloaded into (a third of a short-lived process's
# instructions under the agent). The code that runs in the agent's signal
# handlers (SIGNAL_OBJS) calls the C library through the GOT (-fno-plt),
# which the loader fills at load time: a handler never enters the lazy
# resolver (test/integration/signal_safety.sh checks it). So does the
# lookup of the C library's functions (next_symbol.c), which an interposer's
# first call may run in the host's own signal handler.
# -fini names an empty function among the loading code instead of crti's
# empty _fini, alone on the last page of the code (a fault at every exit).
LDFLAGS_AGENT := -shared -Wl,-z,defs -Wl,-z,nodelete -Wl,--sort-section=alignment \
        -Wl,-fini=agent_dt_fini -Wl,--version-script=agent/exports.map $(LDFLAGS)
# The user's CPPFLAGS, CFLAGS and LDFLAGS (packagers' hardening flags) come
# after the agent's own, so that they win where they overlap.
# libdw, libelf, zlib and liblzma are not linked: agent/core/libs.c loads
# them with a handle of their own, out of reach of a host's same names.
LIBS_AGENT := -ldl -lpthread -lrt
# Unit tests take Debian's civetweb library; the agent compiles civetweb.c
# from Debian's source package with IPv6, which that library lacks
# (scripts/civetweb-source fetches it once per build tree). No TLS, CGI or
# file serving: the agent serves its own handler only. Its Date header is
# formatted with the agent's gmtime_r (agent/core/clock.c), not the C
# library's, whose time zone lock a fork child would inherit held.
LIBS_UNIT := -lcivetweb -l:libiberty.a $(LIBS_AGENT) -lz -llzma -ldw -lelf -lm
CIVETWEB_SRC ?= $(BUILD)/civetweb-src
CIVETWEB_OBJ := $(BUILD)/civetweb/civetweb.o
# Names only glibc has, which the code the project does not write imports:
# the fortified printf family (__sprintf_chk, ...) that Debian's
# libiberty.a calls, and fcntl64 (civetweb asks for 64-bit file offsets).
# The agent links copies of the two with these references made weak:
# musl's loader, which refuses a preload with a name it cannot resolve,
# then loads the agent, which stands aside there (docs/operations.md);
# glibc's binds them as before. test/integration/musl_host.sh checks that
# no other name musl lacks is imported.
OBJCOPY ?= objcopy
GLIBC_ONLY := --wildcard --weaken-symbol='__*_chk' --weaken-symbol=fcntl64
LIBIBERTY := $(BUILD)/libiberty-weak.a
CIVETWEB_LINKED := $(BUILD)/civetweb/civetweb-weak.o
# `make CIVETWEB=system` links Debian's library instead (offline builds;
# no IPv6; such an agent does not load under musl's loader, which has no
# libcivetweb).
ifeq ($(CIVETWEB),system)
CIVETWEB_OBJ :=
CIVETWEB_LINKED :=
LIBS_AGENT += -lcivetweb
endif
CFLAGS_CIVETWEB := -std=gnu11 -O2 -g -fPIC -fno-omit-frame-pointer \
        -fvisibility=hidden -ftls-model=initial-exec -D_GNU_SOURCE -pthread \
        -DUSE_IPV6 -DNO_SSL -DNO_CGI -DNO_FILES -DNO_CACHING \
        -DREENTRANT_TIME -Dgmtime_r=clock_gmtime_r \
        -I$(CIVETWEB_SRC)/include $(EXTRA_CFLAGS) $(CPPFLAGS) $(CFLAGS)

# pprof-attach, a program of its own beside the library (attach/,
# docs/attach.md): it loads the agent into a process already running.
# Its calls are x86_64's (registers, stack, system-call restart): other
# targets build and install the library without it.
ATTACH := $(if $(findstring x86_64,$(shell $(CC) -dumpmachine)),$(BUILD)/pprof-attach)
ATTACH_SRCS := $(wildcard attach/*.c)

SRCS := $(wildcard agent/*.c agent/*/*.c encoder/*.c http/*.c process/*.c)
# Assembled: files embedded with .incbin (the flame graph's script).
ASM_SRCS := $(wildcard encoder/*.S)
OBJS := $(SRCS:%.c=$(BUILD)/%.o) $(ASM_SRCS:%.S=$(BUILD)/%.o)
LIB  := $(BUILD)/libpprofagent.so

# Objects that define interposed C-library names, and the process shell
# (the constructor among them), stay out of the archive that unit tests
# link against.
UNIT_OBJS := $(filter-out $(BUILD)/agent/%_hooks.o $(BUILD)/process/%.o,$(OBJS))
UNIT_LIB  := $(BUILD)/libpprof_unit.a

UNIT_SRCS := $(wildcard test/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:test/unit/%.c=$(BUILD)/test/unit/%)
PROG_SRCS := $(wildcard test/programs/*.c test/programs/*.cc test/programs/*.rs)
PROG_BINS := $(patsubst test/programs/%,$(BUILD)/test/programs/%,$(basename $(PROG_SRCS)))

# Fuzz targets (libFuzzer, clang): the parsers facing the network, built
# with ASan+UBSan from their sources alone. A short run is part of `make
# test` (test/integration/fuzz_parsers.sh); `make fuzz` runs each for
# FUZZ_SECONDS.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 300
FUZZ_SRCS := $(wildcard test/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRCS:test/fuzz/%.c=$(BUILD)/fuzz/%)
FUZZ_DEPS := http/auth.c http/parse.c http/respond.c http/routes.c agent/core/config.c agent/core/config_push.c encoder/buf.c \
        agent/core/log.c agent/core/real.c agent/core/next_symbol.c test/fuzz/stubs.c

DEPS_STAMP := $(BUILD)/.deps-installed

.PHONY: all deps demo check test test-bins bench bench-bins install uninstall clean \
        fuzz test-asan test-tsan

all: $(LIB) $(ATTACH)

# Installs missing system packages once per build tree. Only `make deps`,
# `make demo` and `make test` run it: a plain `make` builds with what is
# there and installs nothing.
$(DEPS_STAMP): scripts/install-deps
	@sh scripts/install-deps
	@mkdir -p $(BUILD) && touch $@

deps: $(DEPS_STAMP)

# Header dependencies: each object lists the headers it read (-MMD), and a
# removed header does not break the build (-MP).
DEPFLAGS := -MMD -MP

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_AGENT) $(DEPFLAGS) -c $< -o $@

SIGNAL_OBJS := $(addprefix $(BUILD)/,agent/cpu/cpu_signal.o \
        agent/threads/threads_signal.o agent/stacks/stack_signal.o \
        agent/stacks/cfi_walk.o agent/stacks/cfi_parse.o \
        process/dump_signal.o agent/wall/wall_signal.o agent/core/log.o \
        agent/core/next_symbol.o agent/threads/blocked_notes.o \
        agent/host/signals_forward.o)
$(SIGNAL_OBJS): CFLAGS_AGENT += -fno-plt

# The lookup every interposer's first call makes (next_symbol.c) runs before
# the agent's constructor, also inside another library's start-up: a
# sanitizer's runtime calls dl_iterate_phdr before its own strcmp, memcpy
# or memset can forward anywhere. It calls no C-library function, and the
# compiler must not make calls of its loops either: gcc turns a copying or
# zeroing loop into memcpy or memset (-fno-tree-loop-distribute-patterns
# stops it), clang too (-fno-builtin). test/integration/sanitizer_hosts.sh
# checks what the object calls.
NO_LOOP_CALLS := -fno-builtin $(shell $(CC) -fno-tree-loop-distribute-patterns \
        -E -x c /dev/null >/dev/null 2>&1 && echo -fno-tree-loop-distribute-patterns)
EARLY_OBJS := $(BUILD)/agent/core/next_symbol.o
$(EARLY_OBJS): CFLAGS_AGENT += $(NO_LOOP_CALLS)

$(BUILD)/%.o: %.S
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -c $< -o $@

# .incbin's file is not seen by -MMD.
$(BUILD)/encoder/flamegraph_js.o: encoder/flamegraph.js

-include $(OBJS:.o=.d)

$(CIVETWEB_SRC)/src/civetweb.c: scripts/civetweb-source
	@sh scripts/civetweb-source $(CIVETWEB_SRC)

$(CIVETWEB_OBJ): $(CIVETWEB_SRC)/src/civetweb.c Makefile
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_CIVETWEB) -c $< -o $@

# The copies with glibc's names weakened (GLIBC_ONLY above), and their
# calls of the names the agent interposes sent to the agent's own
# (agent/core/real.h): civetweb's and the demangler's allocations, locks,
# waits and threads are the agent's work, not the host's. civetweb's
# descriptor calls (socket, accept, close, recv, send, shutdown) stay:
# their doors keep the descriptors the agent's (agent/host/fds.c).
# test/integration/doors.sh checks what is left.
REAL_NAMES := malloc free calloc realloc pthread_create pthread_join \
        pthread_setname_np pthread_mutex_lock pthread_mutex_unlock \
        pthread_cond_wait pthread_cond_timedwait poll connect sleep usleep \
        setuid setgid setgroups
TO_REAL := $(foreach n,$(REAL_NAMES),--redefine-sym $(n)=real_$(n))
$(CIVETWEB_LINKED): $(CIVETWEB_OBJ) Makefile
	$(OBJCOPY) $(GLIBC_ONLY) $(TO_REAL) $< $@

$(LIBIBERTY): Makefile
	@mkdir -p $(dir $@)
	$(OBJCOPY) $(GLIBC_ONLY) $(TO_REAL) "$$($(CC) -print-file-name=libiberty.a)" $@

$(LIB): $(OBJS) $(CIVETWEB_LINKED) $(LIBIBERTY) agent/exports.map
	$(CC) $(LDFLAGS_AGENT) -o $@ $(OBJS) $(CIVETWEB_LINKED) $(LIBIBERTY) \
	    $(LIBS_AGENT)

ifneq ($(ATTACH),)
$(ATTACH): $(ATTACH_SRCS) attach/attach.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -D_GNU_SOURCE -I. $(WARN) $(CPPFLAGS) $(CFLAGS) \
	    $(ATTACH_SRCS) -o $@ $(LDFLAGS)
endif

$(UNIT_LIB): $(UNIT_OBJS)
	@rm -f $@
	ar rcs $@ $(UNIT_OBJS)

$(BUILD)/test/unit/%: test/unit/%.c $(UNIT_LIB)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O1 -g -D_GNU_SOURCE -pthread -I. -Itest/unit $(WARN) \
	    $(DEPFLAGS) -MF $@.d $(CPPFLAGS) $(CFLAGS) $< -o $@ $(UNIT_LIB) $(LIBS_UNIT) $(LDFLAGS)

-include $(UNIT_BINS:=.d)

# Shared objects test_cfi_walk dlopens: one source, -O2 with and without
# frame pointers (late: loaded after the tables were built).
$(BUILD)/test/unit/test_cfi_walk: $(BUILD)/test/unit/libwalk_nofp.so \
        $(BUILD)/test/unit/libwalk_fp.so $(BUILD)/test/unit/libwalk_late.so \
        $(BUILD)/test/unit/libwalk_dbg.so
$(BUILD)/test/unit/libwalk_nofp.so: test/unit/walk_lib.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fomit-frame-pointer -fPIC -shared $< -o $@
$(BUILD)/test/unit/libwalk_late.so: test/unit/walk_lib.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fomit-frame-pointer -fPIC -shared $< -o $@
# No unwind tables: call-frame information in .debug_frame only.
$(BUILD)/test/unit/libwalk_dbg.so: test/unit/walk_lib.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fomit-frame-pointer -fno-asynchronous-unwind-tables \
	    -fno-unwind-tables -fPIC -shared $< -o $@
$(BUILD)/test/unit/libwalk_fp.so: test/unit/walk_lib.c
	@mkdir -p $(dir $@)
	$(CC) -O2 -g -fno-omit-frame-pointer -fPIC -shared $< -o $@

# Walker truth harness (test-only, never part of the agent): a preload
# library with the agent's table-driven walker that compares it with
# libunwind in a SIGPROF handler (test/integration/walk_truth.sh). The
# C++ program for it is built as release code is: -O2, no frame pointers.
WALKCHECK := $(BUILD)/test/libwalkcheck.so
WALKCHECK_OBJS := $(filter %/cfi_parse.o %/cfi_tables.o %/cfi_walk.o,$(OBJS))
$(WALKCHECK): test/walkcheck/walkcheck.c $(WALKCHECK_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -fPIC -shared -Wl,-z,defs -D_GNU_SOURCE -pthread -I. $(WARN) \
	    $< $(WALKCHECK_OBJS) -o $@ -ldl -lrt
test-bins: $(WALKCHECK)
$(BUILD)/test/programs/walk_cxx: PROG_CXXFLAGS = -O2 -fomit-frame-pointer -finline-functions

# Test programs: plain host programs, built with symbols and frame pointers
# the way a typical service is; they never link against the agent.
$(BUILD)/test/programs/%: test/programs/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O1 -g -fno-omit-frame-pointer -fno-inline -D_GNU_SOURCE \
	    -pthread -I. $< -o $@ -ldl -lm

# The work attach_heap.sh asks of attach_target, in a header of its own.
$(BUILD)/test/programs/attach_target: test/programs/attach_work.h
# The shared object attach_late dlopens after an attach (attach_late.sh).
$(BUILD)/test/programs/attach_late: $(BUILD)/test/programs/libattach_plugin.so
$(BUILD)/test/programs/libattach_plugin.so: test/programs/plugins/attach_plugin.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O1 -g -fno-omit-frame-pointer -fno-inline \
	    -fno-optimize-sibling-calls -fPIC -shared $< -o $@

$(BUILD)/test/programs/%: test/programs/%.cc
	@mkdir -p $(dir $@)
	$(CXX) -O1 -g -fno-omit-frame-pointer -fno-inline -pthread -I. $(PROG_CXXFLAGS) $< -o $@ -ldl

# Exports its own broken zlib, libelf and libdw names, as varnishd does.
$(BUILD)/test/programs/own_libs: test/programs/own_libs.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O1 -g -fno-omit-frame-pointer -fno-inline -rdynamic \
	    -I. $< -o $@

# C++20 for std::binary_semaphore (libstdc++'s futex-based atomic wait).
$(BUILD)/test/programs/futex_truth_cxx: PROG_CXXFLAGS = -std=c++20

# Rust test programs, built as a release build is (optimized, the standard
# library's own frames without frame pointers), with line tables.
RUSTC ?= rustc
$(BUILD)/test/programs/%: test/programs/%.rs
	@mkdir -p $(dir $@)
	MAKEFLAGS= $(RUSTC) -O -g $< -o $@

test-bins: $(LIB) $(ATTACH) $(UNIT_BINS) $(PROG_BINS) $(FUZZ_BINS)

# The tests' OpenTelemetry Collector, built from the Go modules pinned in
# test/collector/go.mod (test/collector/build; kept while newer than them).
COLLECTOR := $(BUILD)/test/collector/otelcol
$(COLLECTOR): test/collector/main.go test/collector/go.mod test/collector/go.sum
	@sh test/collector/build $(BUILD)
test-bins: $(COLLECTOR)

# The packages first (test programs need compilers and tools a plain build
# does not), then the binaries (on every core: JOBS), then the run.
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
test: $(DEPS_STAMP)
	@$(MAKE) --no-print-directory -j$(JOBS) test-bins
	@sh test/run-tests $(BUILD)

# The developer's loop: the unit tests, the house's checks (layers,
# exports) and a smoke run of every endpoint, in a few minutes; `make test`
# runs everything (test/run-tests).
check: $(LIB) $(UNIT_BINS) $(PROG_BINS)
	@PPROF_CHECK=1 sh test/run-tests $(BUILD)

# Several sources in one command: the headers are listed, not generated.
$(BUILD)/fuzz/%: test/fuzz/%.c $(FUZZ_DEPS) $(wildcard agent/*.h agent/*/*.h encoder/*.h http/*.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) -std=gnu11 -g -O1 -fsanitize=fuzzer,address,undefined \
	    -fno-sanitize-recover=undefined -D_GNU_SOURCE -pthread -I. \
	    $< $(FUZZ_DEPS) -o $@ -lcivetweb

fuzz: $(FUZZ_BINS)
	@sh test/fuzz/run $(BUILD) $(FUZZ_SECONDS)

# ASan+UBSan unit tests and the UBSan agent under test programs, in the
# trees $(BUILD)-asan and $(BUILD)-ubsan.
test-asan:
	@sh test/run-sanitizers $(BUILD)

# The unit tests under ThreadSanitizer, in the tree $(BUILD)-tsan (the
# concurrent tables, the ring buffer, the fork gates).
test-tsan:
	@sh test/run-tsan $(BUILD)

demo: $(DEPS_STAMP)
	@$(MAKE) --no-print-directory $(LIB) $(BUILD)/test/programs/demo_service
	@sh scripts/demo $(BUILD)

# The heap bench's floor of interposition: a preload library that only
# forwards the malloc family to the next allocator (never part of the
# agent), built as the agent's interposers are.
FORWARD_SHIM := $(BUILD)/test/bench/libforward_shim.so
$(FORWARD_SHIM): test/bench/forward_shim.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g -fPIC -shared -fvisibility=hidden \
	    -fno-builtin-malloc -fno-builtin-calloc -fno-builtin-realloc -fno-builtin-free \
	    -Wl,-z,defs -Wl,-z,now -D_GNU_SOURCE $(WARN) $< -o $@ -ldl

# What the benchmarks run; test/bench/run builds it first, so that one area
# (sh test/bench/run build contention) works from a fresh clone too.
bench-bins: $(LIB) $(PROG_BINS) $(UNIT_BINS) $(FORWARD_SHIM)

bench: bench-bins
	@sh test/bench/run $(BUILD)

# Installed: the library, the public header, a pkg-config file (generated:
# `pkg-config --variable=agent pprofagent` gives the path for LD_PRELOAD),
# the operator's scripts and the configuration's man page. DESTDIR is a
# staging root (packages); PREFIX is where the files will live.
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
BINDIR       ?= $(PREFIX)/bin
MANDIR       ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
SCRIPTS      := pprof-systemd pprof-snapshot
VERSION      ?= $(shell git describe --always --dirty 2>/dev/null || echo 0)

install: $(LIB) $(ATTACH)
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) \
	    $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man7 $(DESTDIR)$(PKGCONFIGDIR)
	install -m 0755 $(LIB) $(DESTDIR)$(LIBDIR)/libpprofagent.so
	install -m 0644 agent/pprofagent.h $(DESTDIR)$(INCLUDEDIR)/pprofagent.h
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' \
	    'includedir=$(INCLUDEDIR)' 'agent=$${libdir}/libpprofagent.so' '' \
	    'Name: pprofagent' \
	    'Description: Go-compatible /debug/pprof profiling for native processes (LD_PRELOAD agent; its API is weak, so nothing to link)' \
	    'Version: $(VERSION)' 'Cflags: -I$${includedir}' 'Libs:' \
	    > $(DESTDIR)$(PKGCONFIGDIR)/pprofagent.pc
	chmod 0644 $(DESTDIR)$(PKGCONFIGDIR)/pprofagent.pc
	for s in $(SCRIPTS); do install -m 0755 scripts/$$s $(DESTDIR)$(BINDIR)/$$s; done
	[ -z "$(ATTACH)" ] || install -m 0755 $(ATTACH) $(DESTDIR)$(BINDIR)/pprof-attach
	install -m 0644 agent/pprofagent.7 $(DESTDIR)$(MANDIR)/man7/pprofagent.7

uninstall:
	rm -f $(DESTDIR)$(LIBDIR)/libpprofagent.so \
	      $(DESTDIR)$(INCLUDEDIR)/pprofagent.h \
	      $(DESTDIR)$(PKGCONFIGDIR)/pprofagent.pc \
	      $(DESTDIR)$(MANDIR)/man7/pprofagent.7 \
	      $(SCRIPTS:%=$(DESTDIR)$(BINDIR)/%) $(DESTDIR)$(BINDIR)/pprof-attach

clean:
	rm -rf $(BUILD)
