# fa3-tune: measures every compiled kernel on the present GPU and writes the tuning table
# (docs/fa3_tune.md). Included by the Makefile after bench/bench.mk (it links the bench's
# objects: BENCH_OBJS) and after the fa3_tests rule; objects are built by the Makefile's
# $(BUILD)/obj/%.o rule, under $(BUILD)/obj/tools/fa3_tune/.

# The pure part (options, buckets, winners, merging, the table's JSON, the report): no CUDA
# calls, also linked into fa3_tests for test/test_fa3_tune.cpp.
FA3_TUNE_CPU_SRCS := tools/fa3_tune/tune_options.cpp tools/fa3_tune/tune_plan.cpp \
                     tools/fa3_tune/tune_table.cpp tools/fa3_tune/tune_report.cpp
FA3_TUNE_CPU_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(FA3_TUNE_CPU_SRCS))
# The program: the pure part, the command line and GPU loop (main.cpp), and fa3-bench's
# objects for the measurement itself (runner, timing, inputs, check, device, cuda_util, ...),
# all but the bench's own main.
FA3_TUNE_OBJS := $(FA3_TUNE_CPU_OBJS) $(BUILD)/obj/tools/fa3_tune/main.o \
                 $(filter-out $(BUILD)/obj/bench/main.o,$(BENCH_OBJS))

$(BUILD)/fa3-tune: $(FA3_TUNE_OBJS) $(BUILD)/libfa3.a
	$(CXX) -o $@ $(FA3_TUNE_OBJS) $(BUILD)/libfa3.a $(CUDART_LIBS)

# test/test_fa3_tune.cpp tests the pure part: link it into fa3_tests. The recipe of
# fa3_tests expands $(TEST_OBJS) when it runs, so appending here is enough even after the
# rule. (It also uses bench objects that bench.mk already adds: problems, report, check.)
TEST_OBJS += $(FA3_TUNE_CPU_OBJS)
$(BUILD)/fa3_tests: $(FA3_TUNE_CPU_OBJS)
