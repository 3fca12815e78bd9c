# fa3-bench: the benchmark program and the CPU-testable part of it.
# Included by the Makefile in place of its own BENCH_* lines, after SUPPORT_OBJS,
# CUDART_LIBS and the fa3_tests rule are defined.

BENCH_SRCS    := $(wildcard bench/*.cpp)
BENCH_CU_SRCS := $(wildcard bench/*.cu)
BENCH_CU_OBJS := $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(BENCH_CU_SRCS))
BENCH_OBJS    := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(BENCH_SRCS)) $(BENCH_CU_OBJS) $(SUPPORT_OBJS)

# The bench's own CUDA kernel (the baseline's softmax), linked with the static runtime.
BENCH_NVCC_FLAGS := -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Ibench

$(BUILD)/obj/bench/%.cu.o: bench/%.cu $(wildcard bench/*.h) | $(BUILD)/.deps-ok
	@mkdir -p $(@D)
	$(NVCC) $(BENCH_NVCC_FLAGS) -ccbin $(CXX) -c -o $@ $<

$(BUILD)/fa3-bench: $(BENCH_OBJS) $(BUILD)/libfa3.a
	$(CXX) -o $@ $(BENCH_OBJS) $(BUILD)/libfa3.a $(CUDART_LIBS)

# test/test_bench_cli.cpp tests the option parser and the pure functions: link those
# objects (no CUDA calls in them) into fa3_tests. The recipe of fa3_tests expands
# $(TEST_OBJS) when it runs, so appending here is enough even after the rule.
BENCH_CPU_OBJS := $(patsubst %,$(BUILD)/obj/bench/%.o,options cli_values problems stats check backward_check inputs report baseline_gemms)
TEST_OBJS      += $(BENCH_CPU_OBJS)
$(BUILD)/fa3_tests: $(BENCH_CPU_OBJS)
