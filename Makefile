# tank — top-level build.
#
# Layout: every layer folder (runtime/ supervisor/ store/ pod/ reconciler/
# api/) contributes its *.c to one static library, build/libtank.a.  Each
# cmd/*.c is a program (tankd, tankctl) linked against it; cmd/lib/*.c is
# shared by the programs only.  tests/<layer>/*.c are linked into ONE
# Criterion binary so that `make test` ends with a single synthesis line;
# tests/helpers/*.c are small programs the tests exec.  bench/*.c are
# programs; bench/run drives them.
#
# `make SAN=1 …` builds with ASan+UBSan into build/san/ so both builds can
# live side by side.

PREFIX  ?= /usr/local
DESTDIR ?=
SAN     ?= 0

ifeq ($(SAN),1)
BUILD   ?= build/san
SANFLAGS = -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else
BUILD   ?= build
SANFLAGS =
endif

# Linked: what every tankd and tankctl needs at start.  Loaded with dlopen
# when a feature first needs it (common/tank_dl.h): libcurl (http probes,
# cluster mode) and libmicrohttpd (--http); their headers are needed to
# build, their libraries are not linked.
PKGS     = msgpack libfyaml lmdb
DL_PKGS  = libcurl libmicrohttpd
CC      ?= cc
# CFLAGS/LDFLAGS are the user's (make CFLAGS='-O0 -g' works); the flags the
# project needs are added on top and cannot be dropped by accident.
CFLAGS  ?= -O2 -g
ALL_CFLAGS = $(CFLAGS) -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -MMD -MP -I. $(SANFLAGS)
ALL_LDFLAGS = $(LDFLAGS) $(SANFLAGS)
# pkg-config is only asked once the deps are installed (see deps below).
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) $(DL_PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
LIBS       = $(PKG_LIBS) -lev -lpthread -lm
# The test binary's own http client (tests/obs/obs_t.c) links libcurl.
TEST_LIBS  = $(shell pkg-config --libs criterion libcurl 2>/dev/null)
# The name tank_dl loads each library by: the SONAME of the dev package's
# library (the one the headers describe), read when tank_dl.c is compiled.
dl_soname  = $(shell readelf -d $(shell pkg-config --variable=libdir $(1) 2>/dev/null)/$(1).so 2>/dev/null | \
		sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
DL_DEFS    = -DTANK_DL_CURL_SONAME='"$(call dl_soname,libcurl)"' \
	     -DTANK_DL_MHD_SONAME='"$(call dl_soname,libmicrohttpd)"'

LAYERS   = common runtime supervisor store keeper pod stack action workflow reconciler manifest kinds api obs cluster daemon
LIB_SRC  = $(wildcard $(addsuffix /*.c,$(LAYERS)))
# obs/page.html becomes a C string at build time (obs/obs_page.h).
PAGE_C   = $(BUILD)/gen/obs_page_html.c
LIB_OBJ  = $(LIB_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/gen/obs_page_html.o
CMDLIB_SRC = $(wildcard cmd/lib/*.c)
CMDLIB_OBJ = $(CMDLIB_SRC:%.c=$(BUILD)/obj/%.o)
CMD_SRC  = $(wildcard cmd/*.c)
CMD_BIN  = $(CMD_SRC:cmd/%.c=$(BUILD)/bin/%)
TEST_SRC = $(wildcard tests/*/*.c)
TEST_SRC := $(filter-out tests/helpers/% tests/soak/% tests/kinds/%,$(TEST_SRC))
TEST_OBJ = $(TEST_SRC:%.c=$(BUILD)/obj/%.o)
THELP_SRC = $(wildcard tests/helpers/*.c)
THELP_BIN = $(THELP_SRC:tests/helpers/%.c=$(BUILD)/tests/helpers/%)
# The test build of tankd and tankctl: the same programs with the test
# kinds' list (tests/kinds/kinds_test.c replaces kinds/kinds.c at link).
KTEST_SRC = $(wildcard tests/kinds/*.c)
KTEST_OBJ = $(KTEST_SRC:%.c=$(BUILD)/obj/%.o)
KTEST_BIN = $(BUILD)/tests/kinds/bin/tankd $(BUILD)/tests/kinds/bin/tankctl
BENCH_SRC = $(wildcard bench/*.c)
BENCH_BIN = $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
LIBTANK  = $(BUILD)/libtank.a
# tests/support: linked into the test binary (it is in TEST_SRC), and into
# the helpers, the soak and the benchmarks for the leftovers machinery.
TSUP_OBJ = $(BUILD)/obj/tests/support/tsupport.o $(BUILD)/obj/tests/support/ts_etcd.o
TESTBIN  = $(BUILD)/tests/tank-tests
DEPS_OK  = build/.deps-ok

# Criterion options for `make test`; e.g. make test TEST_ARGS='--filter runtime/*'
TEST_ARGS ?=

.PHONY: all deps test bench install uninstall clean run fuzz soak
# Keep objects of programs: they are not intermediate files to delete.
.SECONDARY:

SOAK_BIN = $(BUILD)/tests/soak

all: $(LIBTANK) $(CMD_BIN) $(THELP_BIN) $(BENCH_BIN) $(SOAK_BIN) $(KTEST_BIN)

# Installs missing Debian packages; cheap when everything is present.  The
# stamp is refreshed only when a header went missing, so a normal build
# costs one `test -e` per header.
deps:
	@sh scripts/deps.sh

$(DEPS_OK): scripts/deps.sh
	@sh scripts/deps.sh
	@mkdir -p $(@D) && touch $@

$(BUILD)/obj/%.o: %.c | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(PKG_CFLAGS) -c -o $@ $<

$(BUILD)/obj/common/tank_dl.o: ALL_CFLAGS += $(DL_DEFS)

# Each line of the page becomes a string literal ("\\" and "\"" escaped).
$(PAGE_C): obs/page.html
	@mkdir -p $(@D)
	{ echo '/* Generated from obs/page.html by the Makefile: do not edit. */'; \
	  echo '#include "obs/obs_page.h"'; \
	  echo 'const char obs_page_html[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/' $<; \
	  echo ';'; \
	  echo 'const size_t obs_page_html_len = sizeof obs_page_html - 1;'; } > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/gen/obs_page_html.o: $(PAGE_C) | $(DEPS_OK)
	@mkdir -p $(@D)
	$(CC) $(ALL_CFLAGS) $(PKG_CFLAGS) -c -o $@ $<

$(LIBTANK): $(LIB_OBJ)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/bin/%: $(BUILD)/obj/cmd/%.o $(CMDLIB_OBJ) $(LIBTANK)
	@mkdir -p $(@D)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/tests/kinds/bin/%: $(BUILD)/obj/cmd/%.o $(KTEST_OBJ) $(CMDLIB_OBJ) $(LIBTANK)
	@mkdir -p $(@D)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/tests/helpers/%: $(BUILD)/obj/tests/helpers/%.o $(TSUP_OBJ) $(LIBTANK)
	@mkdir -p $(@D)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(SOAK_BIN): $(BUILD)/obj/tests/soak/soak.o $(TSUP_OBJ) $(LIBTANK)
	@mkdir -p $(@D)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

# The chaos soak (tests/soak/soak.c, docs/soak.md): SOAK_SECONDS,
# SOAK_SEED, SOAK_PODS.  Not part of `make test`.  Under the leftovers
# check (docs/testing.md); its "N passed, M failed" line stays last.
soak: all
	BUILD=$(BUILD) sh scripts/with-leftovers.sh '^[0-9]+ passed, [0-9]+ failed$$' $(SOAK_BIN)

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(TSUP_OBJ) $(LIBTANK)
	@mkdir -p $(@D)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

# The program every storm supervises (bench/workload.c): libc only, so
# that its start costs what a small daemon's does, the same under every
# supervisor.  Through the rule above it would load tankd's libraries
# (libcurl and its thirty dependencies: 8 ms of CPU a start, not 1).
$(BUILD)/bench/workload: $(BUILD)/obj/bench/workload.o
	@mkdir -p $(@D)
	$(CC) $(ALL_LDFLAGS) -o $@ $^

$(TESTBIN): $(TEST_OBJ) $(LIBTANK)
	@mkdir -p $(@D)
	$(CC) $(ALL_LDFLAGS) -o $@ $(TEST_OBJ) $(LIBTANK) $(TEST_LIBS) $(LIBS)

# Tests find helper programs and the tank binaries through these variables.
test: all $(TESTBIN)
	set -f; TANK_BUILD_DIR=$(abspath $(BUILD)) TANK_SRC_DIR=$(CURDIR) sh scripts/run-tests.sh $(TESTBIN) $(TEST_ARGS)

# Under the leftovers check (docs/testing.md), which says its verdict last.
bench: all
	@sh scripts/bench-deps.sh
	BUILD=$(BUILD) sh scripts/with-leftovers.sh '' bench/run

# Fuzzing with libFuzzer (clang, installed on demand): every target of
# tests/fuzz/fuzz_targets.h for FUZZ_SECONDS each, over its seed corpus
# and past failures; see docs/fuzzing.md.  Not part of `make test`, which
# replays the corpus and the past failures instead.
FUZZ_SECONDS ?= 60
FUZZ_CC      ?= clang
FUZZ_BUILD    = build/fuzz
FUZZ_FLAGS    = -O1 -g -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wno-unknown-warning-option -I. \
		-fsanitize=address,undefined -fno-sanitize-recover=undefined \
		-fno-omit-frame-pointer
FUZZ_LIB_OBJ  = $(LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o) $(FUZZ_BUILD)/obj/tests/fuzz/fuzz_targets.o \
		$(FUZZ_BUILD)/obj/gen/obs_page_html.o
FUZZ_TARGETS  = frame params manifest record tmpl

$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link $(PKG_CFLAGS) -c -o $@ $<

$(FUZZ_BUILD)/obj/common/tank_dl.o: FUZZ_FLAGS += $(DL_DEFS)

$(FUZZ_BUILD)/obj/gen/obs_page_html.o: $(PAGE_C)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link $(PKG_CFLAGS) -c -o $@ $<

$(FUZZ_BUILD)/fuzz-%: tests/fuzz/driver/fuzz_main.c $(FUZZ_LIB_OBJ)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer -DTF_TARGET=$(call fuzz_index,$*) \
		-o $@ $< $(FUZZ_LIB_OBJ) $(LIBS)

fuzz_index = $(if $(filter frame,$1),0,$(if $(filter params,$1),1,$(if $(filter manifest,$1),2,$(if $(filter tmpl,$1),4,3))))

fuzz:
	@sh scripts/deps.sh fuzz
	$(MAKE) $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz-%)
	FUZZ_SECONDS=$(FUZZ_SECONDS) sh scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_TARGETS)

# The main job: build, start tankd on the default data dir, apply examples.
run: all
	BUILD=$(BUILD) scripts/run.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man8
	for b in $(CMD_BIN); do install -m 0755 $$b $(DESTDIR)$(PREFIX)/bin/; done
	install -m 0644 docs/man/tankctl.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 docs/man/tank-pod.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	install -m 0644 docs/man/tankd.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions \
		$(DESTDIR)$(PREFIX)/share/zsh/site-functions
	$(BUILD)/bin/tankctl completion bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/tankctl
	$(BUILD)/bin/tankctl completion zsh > $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_tankctl
	# Service definitions (contrib/, docs/operations.md), their paths
	# pointed at $(PREFIX)/bin: a systemd unit where systemd looks for
	# local units, s6 and runit service directories to copy or link into
	# a scan directory, and the Grafana dashboard.
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/system \
		$(DESTDIR)$(PREFIX)/share/tank/s6/tankd/log \
		$(DESTDIR)$(PREFIX)/share/tank/runit/tankd/log \
		$(DESTDIR)$(PREFIX)/share/tank/grafana
	sed 's|/usr/local/bin/|$(PREFIX)/bin/|g' contrib/tankd.service \
		> $(DESTDIR)$(PREFIX)/lib/systemd/system/tankd.service
	chmod 0644 $(DESTDIR)$(PREFIX)/lib/systemd/system/tankd.service
	for f in s6/tankd/run s6/tankd/log/run runit/tankd/run runit/tankd/check \
		 runit/tankd/log/run; do \
		sed 's|/usr/local/bin/|$(PREFIX)/bin/|g' contrib/$$f \
			> $(DESTDIR)$(PREFIX)/share/tank/$$f && \
		chmod 0755 $(DESTDIR)$(PREFIX)/share/tank/$$f || exit 1; \
	done
	install -m 0644 contrib/s6/tankd/notification-fd contrib/s6/tankd/timeout-kill \
		$(DESTDIR)$(PREFIX)/share/tank/s6/tankd/
	install -m 0644 contrib/grafana-tank.json $(DESTDIR)$(PREFIX)/share/tank/grafana/

# Removes what install put there, and nothing else (no data dir: pods'
# state and logs are the operator's to keep or remove).
uninstall:
	for b in $(notdir $(CMD_BIN)); do rm -f $(DESTDIR)$(PREFIX)/bin/$$b; done
	rm -f $(DESTDIR)$(PREFIX)/share/man/man1/tankctl.1 \
		$(DESTDIR)$(PREFIX)/share/man/man5/tank-pod.5 \
		$(DESTDIR)$(PREFIX)/share/man/man8/tankd.8 \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/tankctl \
		$(DESTDIR)$(PREFIX)/share/zsh/site-functions/_tankctl \
		$(DESTDIR)$(PREFIX)/lib/systemd/system/tankd.service \
		$(DESTDIR)$(PREFIX)/share/tank/grafana/grafana-tank.json
	rm -rf $(DESTDIR)$(PREFIX)/share/tank/s6 $(DESTDIR)$(PREFIX)/share/tank/runit
	-rmdir $(DESTDIR)$(PREFIX)/share/tank/grafana $(DESTDIR)$(PREFIX)/share/tank 2>/dev/null

clean:
	rm -rf build

ALL_OBJ = $(LIB_OBJ) $(TEST_OBJ) $(KTEST_OBJ) $(CMDLIB_OBJ) $(CMD_SRC:%.c=$(BUILD)/obj/%.o) $(BUILD)/obj/tests/soak/soak.o \
	  $(THELP_SRC:%.c=$(BUILD)/obj/%.o) $(BENCH_SRC:%.c=$(BUILD)/obj/%.o)
-include $(ALL_OBJ:.o=.d)
