# fa3: FlashAttention-3 for Hopper. `make test` and `make bench` are all a new machine needs.
#
#   make            build libfa3 (.so and .a), the tests and the tools, with the production
#                   kernels (src/kernels/kernels.mk); uses every core unless -j is given
#   make lab        the same into build/lab/, with every lab kernel too (fa3-tune's search)
#   make test       install missing dependencies, build, run every test (GPU tests skip
#                   with a reason when there is no driver or Hopper GPU)
#   make bench      build and run the default forward benchmark on the GPU
#   make sanitize   run the [gpu] tests under compute-sanitizer memcheck/racecheck/synccheck
#   make deps       install missing dependencies (Debian: catch2, nlohmann-json3-dev)
#   make DEBUG=1    kernels with bounded mbarrier waits that trap with a message on a hang

# Every core by default: the kernels are independent compilations (`make -jN` still wins). Only
# the top-level make sets it: a sub-make (make lab) joins its parent's jobserver.
ifeq ($(MAKELEVEL),0)
ifeq ($(filter -j% --jobs%,$(MAKEFLAGS)),)
MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)
endif
endif

CUDA_HOME ?= $(or $(patsubst %/bin/nvcc,%,$(shell command -v nvcc 2>/dev/null)),/usr/local/cuda)
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CXX       ?= g++
DEBUG     ?= 0
# Debug kernels go to their own build directory: they must never be mistaken for release ones.
BUILD     ?= $(if $(filter 1,$(DEBUG)),build-debug,build)
export CXX NVCC

include src/kernels/kernels.mk
# production: the kernels the built-in table picks and the reference ones; lab: all of them.
KERNEL_SET ?= production
ifeq ($(KERNEL_SET),lab)
FWD_KERNELS := $(FWD_PRODUCTION_KERNELS) $(FWD_LAB_KERNELS)
BWD_KERNELS := $(BWD_PRODUCTION_KERNELS) $(BWD_LAB_KERNELS)
else ifeq ($(KERNEL_SET),production)
FWD_KERNELS := $(FWD_PRODUCTION_KERNELS)
BWD_KERNELS := $(BWD_PRODUCTION_KERNELS)
else
$(error KERNEL_SET must be production or lab, not '$(KERNEL_SET)')
endif
# Cubins depend only on their name and the kernel headers: the lab build shares the
# production build's, so `make lab` compiles only the lab kernels.
CUBIN_DIR ?= $(BUILD)/cubin

# ---- kernels: one cubin per config, sm_90a ----------------------------------------------
NVCC_FLAGS := -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -cubin \
              -Xptxas -v,--warn-on-spills -Iinclude -Isrc -I.
# Debug kernels print and trap on a hung mbarrier wait; the printf serializes their wgmma
# and gives them a stack frame, so their ptxas report is shown, not enforced.
# (-lineinfo, which quadruples a cubin, only there: every tool embeds every cubin.)
ifeq ($(DEBUG),1)
NVCC_FLAGS += -DFA3_DEBUG_HANG=1 -lineinfo
PTXAS_CHECK := tools/check_ptxas.sh --report-only
else
PTXAS_CHECK := tools/check_ptxas.sh
endif
KERNEL_HEADERS := $(wildcard ptx/*.cuh src/tile/*.cuh src/tile/*.h src/kernels/*.cuh \
                              src/kernels/*.h src/kernels/fwd/*.cuh src/kernels/lab/*.cuh)

CUBINS := $(patsubst %,$(CUBIN_DIR)/%.cubin,$(FWD_KERNELS) $(BWD_KERNELS))

# The flags a cubin was built with, rewritten (at parse time) only when they change, so that
# a changed NVCC_FLAGS or DEBUG rebuilds every cubin and an unchanged one rebuilds none.
CUBIN_FLAGS := $(CUBIN_DIR)/.flags
CUBIN_FLAGS_TEXT := $(NVCC_FLAGS) | $(PTXAS_CHECK)
ifneq ($(strip $(CUBIN_FLAGS_TEXT)),$(strip $(shell cat $(CUBIN_FLAGS) 2>/dev/null)))
$(shell mkdir -p $(CUBIN_DIR) && printf '%s\n' '$(CUBIN_FLAGS_TEXT)' > $(CUBIN_FLAGS))
endif

$(CUBIN_DIR)/fa3_fwd_%.cubin: src/kernels/fwd.cu $(KERNEL_HEADERS) $(CUBIN_FLAGS) | $(BUILD)/.deps-ok
	@mkdir -p $(@D)
	@echo "nvcc   $(notdir $@)"
	@$(NVCC) $(NVCC_FLAGS) -DFA3_KERNEL_NAME=fa3_fwd_$* -o $@ $< > $@.log 2>&1 \
	  || { cat $@.log; rm -f $@; exit 1; }
	@$(PTXAS_CHECK) $@.log || { rm -f $@; exit 1; }

# 1 where a backward kernel's cubin has the <name>_lf entry (BwdConfig::causal_last_first:
# causal, no _kvt, block_m == block_n), else 0; bwd.cu asserts that the two agree.
bwd_last_first = $(if $(and $(findstring _causal,$1),$(if $(findstring _kvt_,$1),,1),$(shell \
  echo '$1' | grep -Eq '_m([0-9]+)_n\1_' && echo 1)),1,0)

$(CUBIN_DIR)/fa3_bwd_%.cubin: src/kernels/bwd.cu $(KERNEL_HEADERS) $(CUBIN_FLAGS) | $(BUILD)/.deps-ok
	@mkdir -p $(@D)
	@echo "nvcc   $(notdir $@)"
	@$(NVCC) $(NVCC_FLAGS) -DFA3_KERNEL_NAME=fa3_bwd_$* \
	  -DFA3_BWD_LAST_FIRST=$(call bwd_last_first,$*) -o $@ $< > $@.log 2>&1 \
	  || { cat $@.log; rm -f $@; exit 1; }
	@$(PTXAS_CHECK) $@.log || { rm -f $@; exit 1; }

# ---- host side ----------------------------------------------------------------------------
CXXFLAGS ?= -O2
# What the build needs, kept apart from CXXFLAGS so that `make CXXFLAGS=...` changes only the
# optimization and warnings it names, not the include paths and dependency files.
FA3_CXXFLAGS := -std=c++17 -Wall -Wextra -fPIC -MMD -MP -Iinclude -Isrc -I$(CUDA_HOME)/include
LIB_SRCS := $(wildcard src/runtime/*.cpp) src/api.cpp
LIB_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(LIB_SRCS)) $(BUILD)/obj/gen/embedded.o \
            $(BUILD)/obj/gen/embedded_s.o
TUNING_TABLE := src/runtime/tuning_table.json

$(BUILD)/gen/embedded.S $(BUILD)/gen/embedded.cpp &: $(CUBINS) $(TUNING_TABLE) tools/gen_embedded.sh src/kernels/kernels.mk
	@mkdir -p $(BUILD)/gen
	@tools/gen_embedded.sh $(BUILD)/gen/embedded.S $(BUILD)/gen/embedded.cpp $(TUNING_TABLE) $(CUBINS)

$(BUILD)/obj/gen/embedded_s.o: $(BUILD)/gen/embedded.S
	@mkdir -p $(@D)
	$(CXX) -c -o $@ $<

$(BUILD)/obj/gen/embedded.o: $(BUILD)/gen/embedded.cpp
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) $(FA3_CXXFLAGS) -c -o $@ $<

$(BUILD)/obj/%.o: %.cpp | $(BUILD)/.deps-ok
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) $(FA3_CXXFLAGS) -c -o $@ $<

$(BUILD)/libfa3.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libfa3.so: $(LIB_OBJS)
	$(CXX) -shared -o $@ $^ -Wl,--version-script=src/libfa3.map -ldl -lpthread

# Programs that talk to the GPU themselves (tests, bench) use the static CUDA runtime; it
# too loads the driver at run time, so they start (and explain) on machines without one.
CUDART_LIBS := -L$(CUDA_HOME)/lib64 -lcudart_static -ldl -lpthread -lrt

SUPPORT_SRCS := $(wildcard test/support/*.cpp)
SUPPORT_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(SUPPORT_SRCS))
FA3_CXXFLAGS += -Itest

# Device code of the tests (ptx/ and tile/ layer kernels): compiled by nvcc into host objects
# with an sm_90a image, linked into fa3_tests with the static CUDA runtime.
TEST_CU_SRCS := $(wildcard test/gpu_kernels/*.cu)
TEST_CU_OBJS := $(patsubst %.cu,$(BUILD)/obj/%.o,$(TEST_CU_SRCS))
# (DEBUG=1: their mbarrier waits trap too, as the kernels'.) Held to the kernels' ptxas rules.
$(BUILD)/obj/test/gpu_kernels/%.o: test/gpu_kernels/%.cu test/gpu_kernels/%.h $(KERNEL_HEADERS) | $(BUILD)/.deps-ok
	@mkdir -p $(@D)
	$(NVCC) -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -ccbin $(CXX) -c -Iinclude -Isrc -Itest -I. \
	  -Xptxas -v,--warn-on-spills $(if $(filter 1,$(DEBUG)),-DFA3_DEBUG_HANG=1) -o $@ $< > $@.log 2>&1 \
	  || { cat $@.log; rm -f $@; exit 1; }
	@$(PTXAS_CHECK) $@.log || { rm -f $@; exit 1; }

# A fake CUDA driver for CPU tests of the runtime (loaded by libfa3 through $FA3_LIBCUDA).
$(BUILD)/libfakecuda.so: test/fake_cuda/fake_cuda.cpp | $(BUILD)/.deps-ok
	$(CXX) $(CXXFLAGS) $(FA3_CXXFLAGS) -shared -o $@ $< -lpthread

TEST_SRCS := $(wildcard test/*.cpp) $(SUPPORT_SRCS)
TEST_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(TEST_SRCS)) $(TEST_CU_OBJS)
# The CPU tests' files are compiled at -Og (the last -O wins): at -O2 their Catch2 assertions
# cost a clean build nearly as much CPU time as the kernels; -Og compiles them in about 60%
# of the time and runs them as fast (docs/perf-history.md v65). The GPU tests' files (host
# loops over tensors of up to 2^31 elements), the float64 reference (test/support), the
# library and the tools keep -O2.
CPU_TEST_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(filter-out %_gpu.cpp,$(wildcard test/*.cpp)))
$(CPU_TEST_OBJS): CXXFLAGS += -Og
# bench.mk, fa3_sass.mk and fa3_tune.mk (included below) add their objects to this rule.
$(BUILD)/fa3_tests: $(TEST_OBJS) $(BUILD)/libfa3.a | $(BUILD)/libfakecuda.so
	$(CXX) -o $@ $(TEST_OBJS) $(FA3_SASS_LIB_OBJS) $(BUILD)/libfa3.a $(CUDART_LIBS)

include bench/bench.mk
include tools/fa3_sass.mk
include tools/fa3_tune.mk

$(BUILD)/fa3-table: $(BUILD)/obj/tools/fa3_table.o $(BUILD)/libfa3.a
	$(CXX) -o $@ $^ -ldl -lpthread

PROGRAMS := $(BUILD)/libfa3.so $(BUILD)/libfa3.a $(BUILD)/fa3_tests $(BUILD)/fa3-bench \
            $(BUILD)/fa3-table $(BUILD)/fa3-sass $(BUILD)/fa3-tune

# ---- entry points ------------------------------------------------------------------------
.PHONY: all deps test bench sanitize clean lab check-generated
.DEFAULT_GOAL := all
all: $(PROGRAMS)

# The lab library and tools (build/lab/fa3-tune, fa3-bench --all-configs, fa3-sass --lib
# build/lab/libfa3.so): every kernel of kernels.mk.
# The production cubins first: with `make all lab` the two makes would otherwise compile the
# same cubins (and write their ptxas logs) at once.
lab: $(CUBINS) | $(BUILD)/.deps-ok
	$(MAKE) KERNEL_SET=lab BUILD=$(BUILD)/lab CUBIN_DIR=$(BUILD)/cubin all

deps: $(BUILD)/.deps-ok
# The stamp keeps `make test` on a machine that only runs a carried build/ from needing the
# build's dependencies.
$(BUILD)/.deps-ok:
	@tools/install_deps.sh
	@mkdir -p $(BUILD) && touch $@

test: all check-generated
	$(BUILD)/fa3_tests
	BUILD=$(BUILD) tools/run_python_tests.sh

# The default forward problem (bf16, head dim 128, seqlen 8192, batch 2, 16 heads), checked
# against a float64 reference; `build/fa3-bench --help` for the paper's grid and more.
bench: all
	$(BUILD)/fa3-bench --dtype bf16 --hdim 128 --causal 0 --seqlen 8192 --batch 2 --heads 16 --check

# ptx/wgmma_mma.cuh is committed (a build needs no Python); it must be what its script writes.
# (After the dependencies: they bring python3; a failing script is its own error.)
check-generated: | $(BUILD)/.deps-ok
	@mkdir -p $(BUILD)/gen
	@python3 tools/gen_wgmma.py > $(BUILD)/gen/wgmma_mma.cuh || \
	  { echo "tools/gen_wgmma.py failed" >&2; exit 1; }
	@cmp -s $(BUILD)/gen/wgmma_mma.cuh ptx/wgmma_mma.cuh || \
	  { echo "ptx/wgmma_mma.cuh differs from tools/gen_wgmma.py's output: run tools/gen_wgmma.py > ptx/wgmma_mma.cuh" >&2; exit 1; }

sanitize: all
	tools/sanitize.sh $(BUILD)/fa3_tests

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
-include $(BUILD)/libfakecuda.d
