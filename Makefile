# kevo: one plain GNU Makefile. Objects go to build/; every src/*/*.c is part of libkevo
# (src/base, src/core, src/worker, src/ctl: docs/internals/architecture.md),
# every tests/unit/test_*.c is one cmocka test program linked against it, and
# tests/emul/harness_emul.cpp runs the verification kernels of kernels/harness.cu on the
# host (C++20 for std::barrier) against verify.c.
CC      ?= cc
CUDA    ?= /usr/local/cuda
BUILD   := build
CSTD    := -std=c11 -D_GNU_SOURCE
WARN    := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wpointer-arith -Wstrict-prototypes
OPT     ?= -O2 -g
SAN     ?=
CFLAGS  += $(CSTD) $(WARN) $(OPT) $(SAN) -fPIC -Iinclude -Isrc -I$(CUDA)/include -I$(BUILD)/gen \
           -DKEVO_CUDA_HOME=\"$(CUDA)\" -DKEVO_SOURCE_DIR=\"$(CURDIR)\"
LDLIBS  := -L$(CUDA)/lib64 -Wl,-rpath,$(CUDA)/lib64 -lnvrtc -ljansson -lseccomp -lcrypto \
           -lsqlite3 -lcurl -ldl -lpthread -lm

SRCS    ?= $(wildcard src/*/*.c)
HDRS    := $(wildcard src/*/*.h)

# MPI (optional: `kevo run --mpi`, docs/cluster.md): built in when Open MPI's mpicc, or
# pkg-config's ompi-c, is found (MPI=0 leaves it out even then). With it, src/ctl/mpi_io.c
# is built with MPI's flags and kevo links libmpi; without it, src/ctl/mpi_stub.c, whose
# kevo_mpi_open says kevo was not built with MPI.
ifeq ($(origin MPI),undefined)
MPI     := $(if $(shell command -v mpicc 2>/dev/null)$(shell pkg-config --exists ompi-c 2>/dev/null && echo y),1,0)
endif
ifeq ($(MPI),1)
MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null || pkg-config --cflags ompi-c)
MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null || pkg-config --libs ompi-c)
MPI_SKIP   := src/ctl/mpi_stub.c
CFLAGS     += -DKEVO_MPI
LDLIBS     += $(MPI_LIBS)
else
MPI_SKIP   := src/ctl/mpi_io.c
endif
LIBSRCS := $(filter-out $(MPI_SKIP),$(SRCS))
OBJS    := $(LIBSRCS:src/%.c=$(BUILD)/obj/%.o)
KERNELS := $(wildcard kernels/*.cu kernels/*.c)
KGEN    := $(patsubst kernels/%,$(BUILD)/gen/%.inc,$(KERNELS))
TESTS   := $(wildcard tests/unit/test_*.c)
TBINS   := $(TESTS:tests/unit/%.c=$(BUILD)/tests/%)
LIB     := $(BUILD)/libkevo.a
KEVO    := $(BUILD)/kevo
EMUL    := $(BUILD)/tests/harness_emul

.PHONY: all test run gpu-test bench fuzz deps clean check-tasks asan deps-check checksrc \
        checksrc-selftest report-shot
# the embedded kernels are inputs of many objects: keep them between runs
.SECONDARY: $(KGEN)
all: $(KEVO)

# kernels/NAME.cu -> build/gen/NAME.cu.inc defining kevo_kernel_NAME_cu[] (NUL-terminated)
$(BUILD)/gen/%.inc: kernels/% $(BUILD)/embed
	@mkdir -p $(dir $@)
	$(BUILD)/embed $< kevo_kernel_$(subst .,_,$(subst -,_,$*)) > $@.tmp && mv $@.tmp $@

$(BUILD)/embed: tools/embed.c
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) -O2 $< -o $@

$(BUILD)/obj/%.o: src/%.c $(HDRS) include/kevo.h $(KGEN)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/ctl/mpi_io.o: CFLAGS += $(MPI_CFLAGS)

$(LIB): $(OBJS)
	rm -f $@ && ar rcs $@ $^

$(KEVO): cli/kevo.c $(wildcard cli/*.c) $(LIB)
	$(CC) $(CFLAGS) $(filter %.c,$^) $(LIB) $(LDLIBS) -o $@

$(BUILD)/tests/%: tests/unit/%.c $(wildcard tests/unit/*.h) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests/unit $< $(LIB) $(LDLIBS) -lcmocka -o $@

# The device kernels' logic on the host: no GPU needed (cuda_host.h stands in for CUDA).
$(EMUL): tests/emul/harness_emul.cpp tests/emul/cuda_host.h tests/unit/judge_cases.h \
         kernels/harness.cu $(LIB)
	@mkdir -p $(dir $@)
	$(CXX) -std=c++20 -D_GNU_SOURCE -O1 -g $(SAN) -ffp-contract=off -Wall -Wextra -Werror \
	    -Wno-unused-function -Wno-unused-parameter -Wno-missing-field-initializers \
	    -Iinclude -Isrc -Ikernels -Itests/unit -Itests/emul -I$(CUDA)/include $< $(LIB) \
	    $(LDLIBS) -o $@

# make test: the source rules (fast, first), every unit test program, then the CLI checks
# over the shipped tasks.
test: checksrc checksrc-selftest deps-check $(KEVO) $(TBINS) $(EMUL)
	@set -e; for t in $(TBINS) $(EMUL); do echo "== $$t"; KEVO_BIN=$(abspath $(KEVO)) $$t; done
	$(KEVO) check tasks/ tests/exploits/tasks/
	@set -e; for s in examples/seeds/*.cu examples/seeds/*.c; do \
	    t=$$(ls tasks/*/$$(basename $$s) 2>/dev/null | head -1); \
	    if [ -z "$$t" ]; then echo "$$s: no suite task named like it in tasks/"; exit 1; fi; \
	    $(KEVO) check --task $$t $$s; done
	$(KEVO) check bench/tasks/scale_shift.cu
	$(KEVO) check --task bench/tasks/scale_shift.cu bench/tasks/scale_shift_vec4.cu
	tests/install.sh "$(MAKE)" $(BUILD) $(PREFIX)
	@if [ "$(MPI)" = 1 ]; then tests/mpi/run.sh $(KEVO); \
	else echo "== tests/mpi/run.sh skipped: kevo is built without MPI"; fi
	@echo "all tests passed"

deps-check:
	@tools/deps.sh check

# make checksrc: the house rules a compiler does not check (the house style's source rules: layering
# of src/ folders, banned and raw allocation functions, comma returns, comments naming
# files that are gone, length budgets); tools/checksrc says each one.
PYTHON ?= python3
checksrc:
	$(PYTHON) tools/checksrc

# The checker's own test: each file of tests/checksrc/ breaks one rule (good.c none), so
# it must fail, name every rule, and leave good.c alone.
checksrc-selftest:
	@out=$$($(PYTHON) tools/checksrc --root tests/checksrc --budgets 40,10); \
	if [ $$? != 1 ]; then echo "checksrc self-test: expected exit status 1"; exit 1; fi; \
	for r in $$($(PYTHON) tools/checksrc --list-rules); do \
	    echo "$$out" | grep -q ": $$r: " || { \
	        echo "checksrc self-test: rule $$r not reported:"; echo "$$out"; exit 1; }; \
	done; \
	if echo "$$out" | grep good.c; then echo "checksrc self-test: good.c flagged"; exit 1; fi

# make asan: make test again with AddressSanitizer and UBSan in $(BUILD)/asan (objects,
# programs and the kevo binary the worker tests start), stopping at the first error.
# -fno-sanitize-recover: a UBSan report aborts even without UBSAN_OPTIONS (and GCC then
# knows the reporting path ends, instead of warning about it: -Wformat-overflow)
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
asan:
	ASAN_OPTIONS=halt_on_error=1:abort_on_error=0:detect_leaks=1 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	    $(MAKE) BUILD=$(BUILD)/asan OPT="-O1 -g" SAN="$(SANFLAGS)" test

deps:
	@tools/deps.sh install

run: deps $(KEVO)
	tools/run-default.sh $(KEVO)

# make mcp-sdk-test: kevo mcp driven by the official MCP client SDK (node 18 or later and
# npm; docs/agents.md): npm ci installs the SDK pinned in tests/mcp/package-lock.json
# (into tests/mcp/node_modules, git-ignored) unless it is there already.
.PHONY: mcp-sdk-test
mcp-sdk-test: $(KEVO)
	@test -d tests/mcp/node_modules/@modelcontextprotocol/sdk || \
	    (cd tests/mcp && npm ci --no-audit --no-fund)
	KEVO_BIN=$(abspath $(KEVO)) node tests/mcp/sdk_client.mjs

gpu-test: $(KEVO) $(TBINS)
	tools/gpu-test.sh $(KEVO)

# make report-shot: a kevo report drawn by headless Chromium, saved as a PNG and checked
# (not part of make test; needs chromium). ARCHIVE and RUN name the run (default: a short
# CPU search made first); PNG the picture (default $(BUILD)/report.png). docs/report.md.
PNG ?= $(BUILD)/report.png
report-shot: $(KEVO)
	KEVO=$(KEVO) tools/report-shot.sh $(if $(ARCHIVE),$(ARCHIVE) $(or $(RUN),1),--cpu) $(PNG)

# benchmarks (not tests): programs under bench/, driven by tools/bench-gpu.sh on a GPU;
# bench_archive needs no GPU, so make bench runs it (BENCH_ARCHIVE_N=0 skips it)
BENCHES := $(patsubst bench/%.c,$(BUILD)/bench/%,$(wildcard bench/*.c))
BENCH_ARCHIVE_N ?= 100000
bench: $(KEVO) $(BENCHES)
	@if [ "$(BENCH_ARCHIVE_N)" != 0 ]; then $(BUILD)/bench/bench_archive $(BENCH_ARCHIVE_N); fi
$(BUILD)/bench/%: bench/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< $(LIB) $(LDLIBS) -o $@

# libFuzzer over the task/candidate parser (needs clang); run: make fuzz FUZZ_SECONDS=120
FUZZ_SECONDS ?= 60
fuzz:
	@mkdir -p $(BUILD)
	clang -g -O1 -fsanitize=fuzzer,address,undefined $(CSTD) -Iinclude -Isrc -I$(CUDA)/include \
	    tests/fuzz/fuzz_task.c src/base/mem.c src/base/buf.c src/base/log.c src/core/expr.c \
	    src/core/task.c src/core/task_check.c -o $(BUILD)/fuzz_task
	@mkdir -p $(BUILD)/fuzz-corpus
	UBSAN_OPTIONS=halt_on_error=1 $(BUILD)/fuzz_task -max_total_time=$(FUZZ_SECONDS) \
	    -max_len=8192 -timeout=10 $(BUILD)/fuzz-corpus tests/fuzz/corpus

# make install: kevo into $(DESTDIR)$(PREFIX)/bin, what it reads at run time (prompt
# templates, playbook, price table, the suite and its seeds) into
# $(DESTDIR)$(PREFIX)/share/kevo, laid out as in this tree (where kevo_data_dir,
# src/ctl/datadir.c, finds it), and the man page. make uninstall removes exactly those
# files, then the folders under share/kevo they leave empty (KEVO_DATA is at most two
# folders deep). PREFIX is compiled in too, the data directory's fallback for a kevo moved
# away from its share/kevo: datadir.o is rebuilt when PREFIX changes ($(BUILD)/prefix).
PREFIX  ?= /usr/local
DESTDIR ?=
KEVO_SHARE := $(PREFIX)/share/kevo
KEVO_MAN   := $(PREFIX)/share/man/man1/kevo.1
KEVO_DATA  := $(wildcard prompts/*.md docs/playbook/*.md prices.json tasks/*/*.cu tasks/*/*.c \
                         examples/seeds/*.cu examples/seeds/*.c \
                         docs/agents.md docs/task-format.md docs/harness.md)
KEVO_DATA_DIRS := $(sort $(filter-out ./,$(dir $(KEVO_DATA)) \
                                         $(dir $(patsubst %/,%,$(dir $(KEVO_DATA))))))
.PHONY: install uninstall prefix-check
$(BUILD)/obj/ctl/datadir.o: CFLAGS += -DKEVO_DATA_DIR=\"$(KEVO_SHARE)\"
$(BUILD)/obj/ctl/datadir.o: $(BUILD)/prefix
$(BUILD)/prefix: prefix-check
	@mkdir -p $(dir $@)
	@echo '$(PREFIX)' | cmp -s - $@ || echo '$(PREFIX)' > $@

install: $(KEVO)
	install -D -m 755 $(KEVO) "$(DESTDIR)$(PREFIX)/bin/kevo"
	install -D -m 644 docs/kevo.1 "$(DESTDIR)$(KEVO_MAN)"
	@set -e; for f in $(KEVO_DATA); do install -D -m 644 $$f "$(DESTDIR)$(KEVO_SHARE)/$$f"; done
	@echo "installed $(words $(KEVO_DATA)) data files in $(DESTDIR)$(KEVO_SHARE)"

uninstall:
	rm -f "$(DESTDIR)$(PREFIX)/bin/kevo" "$(DESTDIR)$(KEVO_MAN)"
	@for f in $(KEVO_DATA); do rm -f "$(DESTDIR)$(KEVO_SHARE)/$$f"; done
	@for d in $$(printf '%s\n' $(KEVO_DATA_DIRS) | sort -r); do \
	    rmdir "$(DESTDIR)$(KEVO_SHARE)/$$d" 2>/dev/null || true; done
	@rmdir "$(DESTDIR)$(KEVO_SHARE)" 2>/dev/null || true
	@echo "removed $(words $(KEVO_DATA)) data files from $(DESTDIR)$(KEVO_SHARE)"

clean:
	rm -rf $(BUILD)
