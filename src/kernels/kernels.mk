# The kernels compiled into libfa3, by name. A name is the whole config of its kernel
# (grammar in src/runtime/kernel_registry.h); the Makefile derives compile definitions
# from it. Add a config here to build it; the tuning table decides when it runs.
FWD_KERNELS := \
  fa3_fwd_f16_d64_m128_n128_s2_w2 \
  fa3_fwd_f16_d64_m128_n128_s2_w2_causal \
  fa3_fwd_f16_d128_m128_n128_s2_w2 \
  fa3_fwd_f16_d128_m128_n128_s2_w2_causal \
  fa3_fwd_f16_d256_m128_n64_s2_w2 \
  fa3_fwd_f16_d256_m128_n64_s2_w2_causal \
  fa3_fwd_bf16_d64_m128_n128_s2_w2 \
  fa3_fwd_bf16_d64_m128_n128_s2_w2_causal \
  fa3_fwd_bf16_d128_m128_n128_s2_w2 \
  fa3_fwd_bf16_d128_m128_n128_s2_w2_causal \
  fa3_fwd_bf16_d256_m128_n64_s2_w2 \
  fa3_fwd_bf16_d256_m128_n64_s2_w2_causal
