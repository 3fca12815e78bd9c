# fa3-sass: SASS inspection of the kernels in libfa3 (docs/fa3_sass.md).
# Included by the Makefile after BUILD, CXX, CXXFLAGS, FA3_CXXFLAGS and CUDA_HOME are set; objects are built
# by the Makefile's $(BUILD)/obj/%.o rule, under $(BUILD)/obj/tools/fa3_sass/.

# The analyzer (also linked into fa3_tests, whose [sass] cases run it on test/sass/ fixtures).
FA3_SASS_LIB_SRCS := tools/fa3_sass/sass_text.cpp tools/fa3_sass/instruction_class.cpp \
                     tools/fa3_sass/structure.cpp tools/fa3_sass/kernel_config.cpp \
                     tools/fa3_sass/analysis.cpp tools/fa3_sass/report.cpp \
                     tools/fa3_sass/disassembler.cpp
FA3_SASS_LIB_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(FA3_SASS_LIB_SRCS))
# The Makefile's fa3_tests rule comes before this file, where the variable is still empty: its
# recipe sees the objects, its prerequisites would not (no relink after an analyzer change).
$(BUILD)/fa3_tests: $(FA3_SASS_LIB_OBJS)
# The program: the analyzer, libfa3 opened with dlopen (never linked), the command line.
FA3_SASS_SRCS := $(FA3_SASS_LIB_SRCS) tools/fa3_sass/fa3_library.cpp tools/fa3_sass/main.cpp
FA3_SASS_OBJS := $(patsubst %.cpp,$(BUILD)/obj/%.o,$(FA3_SASS_SRCS))

$(BUILD)/fa3-sass: $(FA3_SASS_OBJS)
	$(CXX) -o $@ $^ -ldl

# Disassembly needs cuobjdump or nvdisasm (CUDA binary utilities): present on the GPU machine,
# absent on the CPU machines, where this target says so and succeeds.
.PHONY: sass-check
sass-check: $(BUILD)/fa3-sass $(BUILD)/libfa3.so
	@tool=$$(for d in "$(CUDA_HOME)/bin" /usr/local/cuda/bin; do \
	           for t in cuobjdump nvdisasm; do [ -x "$$d/$$t" ] && { echo "$$d/$$t"; exit 0; }; done; \
	         done; command -v cuobjdump || command -v nvdisasm); \
	if [ -n "$$tool" ]; then \
	  CUDA_HOME="$(CUDA_HOME)" $(BUILD)/fa3-sass --lib $(BUILD)/libfa3.so \
	    $(if $(wildcard $(TUNING_TABLE)),--table $(TUNING_TABLE)); \
	else \
	  echo "sass-check: skipped: no cuobjdump or nvdisasm in $(sort $(CUDA_HOME)/bin /usr/local/cuda/bin) or PATH" \
	       "(the CUDA binary utilities disassemble the kernels; the GPU machine has them)."; \
	fi
