# The forward kernels compiled into libfa3, by name. A name is the whole config of its kernel:
# src/kernels/fwd_names.h is the grammar and says what every token means (so does
# `build/fa3-table tokens`); the kernel parses its own name at compile time, so the Makefile
# passes nothing else. Add a name here to build it; the tuning table decides when it runs.

# The production set: what `make` builds into libfa3 (and so `make test`, CI and every tool of
# build/). It is the kernels the built-in tuning table picks plus the reference kernels of
# the paper's Table 2 ablation (fp16, d128, 128 x 128 tiles: Algorithm 1 without pipelining,
# with 2-stage pipelining with and without pingpong, pipelining without warp specialization)
# and of fa3-sass's Appendix B.2 check (_ov_b2_pp). test/test_registry.cpp fails when a table
# kernel is missing here or when the list grows past kProductionForwardBudget.
FWD_PRODUCTION_KERNELS := \
  fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_dy_qr \
  fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_os_qr \
  fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_os_qr_causal \
  fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_q3_qr_causal \
  fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_q3_qr_causal \
  fa3_fwd_bf16_d256_m128_n64_s2_w2_ov_cr_im_as_pp_ps_causal \
  fa3_fwd_bf16_d256_m128_n64_s2_w2_ov_cr_im_pp \
  fa3_fwd_bf16_d256_m128_n64_s2_w2_ov_cr_pp \
  fa3_fwd_bf16_d256_m128_n80_s2_w2_ov_cr_im_as_ps_causal \
  fa3_fwd_bf16_d64_m128_n128_s2_w2_ov_cr_ls_hb_pp_ps_xt_qw_q3_causal \
  fa3_fwd_bf16_d64_m128_n128_s2_w2_ov_cr_ls_hb_pp_ps_xt_qw_q3_qr_causal \
  fa3_fwd_bf16_d64_m192_n128_s2_w3_ov_cr_im_ls_pp_ps_xt_qw \
  fa3_fwd_bf16_d64_m192_n128_s2_w3_ov_cr_im_ls_pp_ps_xt_qw_q3 \
  fa3_fwd_bf16_d64_m192_n128_s2_w3_ov_cr_im_ls_pp_ps_xt_qw_q3_causal \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_dy_qr \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_os_qr \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_os_qr_causal \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_q3_qr_causal \
  fa3_fwd_f16_d256_m128_n64_s2_w2_ov_cr_as_pp_ps_causal \
  fa3_fwd_f16_d256_m128_n64_s2_w2_ov_cr_im_as_pp_ps_causal \
  fa3_fwd_f16_d256_m128_n64_s2_w2_ov_cr_im_pp \
  fa3_fwd_f16_d256_m128_n64_s2_w2_ov_cr_pp \
  fa3_fwd_f16_d256_m128_n80_s2_w2_ov_cr_as_ps_causal \
  fa3_fwd_f16_d256_m128_n80_s2_w2_ov_cr_im_as_ps_causal \
  fa3_fwd_f16_d64_m128_n128_s2_w2_ov_cr_ls_hb_pp_ps_xt_qw_q3_causal \
  fa3_fwd_f16_d64_m128_n128_s2_w2_ov_cr_ls_hb_pp_ps_xt_qw_q3_qr_causal \
  fa3_fwd_f16_d64_m192_n128_s2_w3_ov_cr_im_ls_pp_ps_xt_qw_q3 \
  fa3_fwd_f16_d64_m192_n128_s2_w3_ov_cr_im_ls_pp_ps_xt_qw_q3_causal \
  \
  fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_dy_qr \
  fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_os_qr \
  fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_os_qr_causal \
  fa3_fwd_bf16_d64_m128_n128_s2_w2_ov_cr_hb_pp_ps_xt_qw_q3_causal \
  fa3_fwd_bf16_d64_m128_n128_s2_w2_ov_cr_hb_pp_ps_xt_qw_q3_qr_causal \
  fa3_fwd_bf16_d64_m192_n128_s2_w3_ov_pp_ps_xt_qw \
  fa3_fwd_bf16_d64_m192_n128_s2_w3_ov_pp_ps_xt_qw_q3 \
  fa3_fwd_bf16_d64_m192_n128_s2_w3_ov_pp_ps_xt_qw_q3_causal \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_dy_qr \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_os_qr \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_os_qr_causal \
  fa3_fwd_f16_d64_m128_n128_s2_w2_ov_cr_hb_pp_ps_xt_qw_q3_causal \
  fa3_fwd_f16_d64_m128_n128_s2_w2_ov_cr_hb_pp_ps_xt_qw_q3_qr_causal \
  fa3_fwd_f16_d64_m192_n128_s2_w3_ov_pp_ps_xt_qw_q3 \
  fa3_fwd_f16_d64_m192_n128_s2_w3_ov_pp_ps_xt_qw_q3_causal \
  \
  fa3_fwd_f16_d128_m128_n128_s2_w2 \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov_pp \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov_nows \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov_b2_pp

# The lab: the variants measured on the way (docs/perf-history.md), built on demand by
# `make lab` into build/lab/ (its own libfa3 and tools: fa3-tune searches it, fa3-bench
# --all-configs and --ablation time it, fa3-sass inspects it). A lab kernel that wins is
# promoted by adding its name to FWD_PRODUCTION_KERNELS (and to the tuning table). Each
# entry is built for f16 and bf16; the production names are left out of the lab list.
FWD_LAB_TILES := \
  d64_m128_n128_s2_w2 d64_m128_n128_s2_w2_causal d64_m128_n128_s2_w2_ov_pp \
  d64_m128_n128_s2_w2_ov_pp_causal d64_m192_n128_s2_w3_ov_pp d64_m192_n128_s2_w3_ov_pp_causal \
  d64_m192_n128_s2_w3_ov_pp_ps d64_m128_n128_s2_w2_ov_pp_ps_causal \
  d64_m192_n112_s2_w3_ov_pp_ps_causal d64_m128_n128_s2_w2_ov_p2_pp \
  d64_m128_n128_s2_w2_ov_p2_pp_causal d128_m128_n128_s2_w2 d128_m128_n128_s2_w2_causal \
  d128_m128_n128_s2_w2_ov d128_m128_n128_s2_w2_ov_causal d128_m128_n128_s2_w2_ov_pp \
  d128_m128_n128_s2_w2_ov_pp_causal d128_m128_n128_s2_w2_ov_b2 d128_m128_n128_s2_w2_ov_b2_pp \
  d128_m128_n128_s2_w2_ov_b2_pp_causal d128_m128_n176_s2_w2_ov_pp \
  d128_m128_n176_s2_w2_ov_pp_causal d128_m128_n128_s2_w2_ov_pp_ps \
  d128_m128_n128_s2_w2_ov_pp_ps_causal d128_m128_n112_s2_w2_ov_pp \
  d128_m128_n112_s2_w2_ov_pp_causal d128_m128_n112_s2_w2_ov_p2_pp \
  d128_m128_n96_s2_w2_ov_p2_pp_causal d128_m128_n64_s2_w2_ov3_pp d128_m128_n80_s2_w2_ov3_pp \
  d128_m128_n64_s2_w2_ov3_pp_causal d128_m128_n128_s2_w2_ov_nows \
  d128_m128_n128_s2_w2_ov_nows_causal d256_m128_n64_s2_w2 d256_m128_n64_s2_w2_causal \
  d256_m128_n64_s2_w2_ov_pp d256_m128_n64_s2_w2_ov_pp_causal d256_m128_n80_s2_w2_ov_pp \
  d256_m128_n80_s2_w2_ov_pp_causal d64_m192_n128_s2_w3_ov_cr_pp d64_m192_n128_s2_w3_ov_cr_pp_ps \
  d64_m128_n128_s2_w2_ov_cr_pp_ps_causal d64_m192_n112_s2_w3_ov_cr_pp_ps_causal \
  d256_m128_n64_s2_w2_ov_cr_pp d256_m128_n64_s2_w2_ov_cr_pp_causal d256_m128_n80_s2_w2_ov_cr_pp \
  d256_m128_n80_s2_w2_ov_cr_pp_causal d64_m192_n128_s2_w3_ov_cr_pp_c2 \
  d128_m128_n128_s2_w2_ov_pp_c2 d128_m128_n176_s2_w2_ov_pp_c2 d256_m128_n80_s2_w2_ov_cr_pp_c2 \
  d64_m128_n128_s3_w2_ov_pp_ps_causal d64_m192_n112_s3_w3_ov_pp_ps_causal \
  d64_m192_n112_s3_w3_ov_cr_pp_ps_causal d256_m128_n64_s2_w2_ov_pp_ps_causal \
  d256_m128_n64_s2_w2_ov_cr_pp_ps_causal d128_m128_n128_s2_w2_ov_as_pp_ps_causal \
  d128_m128_n128_s2_w2_ov_as_pp_causal d64_m192_n112_s2_w3_ov_as_pp_ps_causal \
  d64_m128_n128_s3_w2_ov_as_pp_ps_causal d256_m128_n64_s2_w2_ov_cr_as_pp_ps_causal \
  d256_m128_n80_s2_w2_ov_cr_as_pp_causal d128_m128_n128_s2_w2_ov_pp_ps_xt \
  d128_m128_n128_s2_w2_ov_pp_ps_xt_causal d128_m128_n128_s2_w2_ov_as_pp_ps_xt_causal \
  d64_m128_n128_s3_w2_ov_pp_ps_xt_causal d64_m192_n112_s2_w3_ov_pp_ps_xt_causal \
  d256_m128_n80_s2_w2_ov_cr d256_m128_n80_s2_w2_ov_cr_causal d256_m128_n64_s2_w2_ov_cr_ps_causal \
  d256_m128_n64_s2_w2_ov_cr_as_ps_causal d64_m128_n128_s2_w2_ov_pp_ps \
  d64_m128_n128_s2_w2_ov_pp_ps_xt d128_m128_n128_s2_w2_ov_ew_pp_ps \
  d128_m128_n128_s2_w2_ov_ew_pp_ps_xt d128_m128_n176_s2_w2_ov_ew_pp_c2 \
  d128_m128_n128_s2_w2_ov_ew_pp d128_m128_n128_s2_w2_ov_pp_ps_xt_qw \
  d128_m128_n128_s2_w2_ov_pp_ps_xt_qw_causal d128_m128_n128_s2_w2_ov_as_pp_ps_xt_qw_causal \
  d64_m128_n128_s3_w2_ov_pp_ps_xt_qw_causal d64_m192_n112_s2_w3_ov_pp_ps_xt_qw_causal \
  d64_m128_n128_s2_w2_ov_pp_ps_xt_qw d128_m128_n128_s2_w2_ov_ew_pp_ps_xt_qw \
  d256_m128_n80_s2_w2_ov_cr_ps_causal d256_m128_n80_s2_w2_ov_cr_as_ps_causal \
  d64_m192_n128_s2_w3_ov_pp_ps_causal d64_m192_n128_s2_w3_ov_pp_ps_xt_qw_causal \
  d64_m192_n128_s2_w3_ov_pp_ps_xt_qw d128_m128_n176_s2_w2_ov_pp_ps \
  d128_m128_n176_s2_w2_ov_pp_ps_causal d64_m128_n176_s2_w2_ov_pp_ps_xt_qw_causal \
  d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_causal d128_m128_n128_s2_w2_ov_cr_as_pp_ps_xt_qw_causal \
  d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw d128_m128_n176_s2_w2_ov_cr_pp_ps \
  d128_m128_n128_s2_w2_ov_hb_pp_ps_xt_qw_causal d128_m128_n128_s2_w2_ov_hb_pp_ps_causal \
  d64_m128_n128_s2_w2_ov_hb_pp_ps_xt_qw_causal d64_m128_n128_s2_w2_ov_hb_pp_ps_xt_qw_q3_causal \
  d64_m192_n128_s2_w3_ov_pp_ps_xt_qw_q3_causal d64_m192_n128_s2_w3_ov_pp_ps_xt_qw_q3 \
  d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_q3_causal d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_q3 \
  d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_os_causal \
  d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_q3_qr_causal \
  d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_q3_qr d256_m128_n64_s2_w2_ov_cr_im_pp \
  d256_m128_n80_s2_w2_ov_cr_im_as_ps_causal \
  d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_q3_qr_causal d256_m128_n80_s2_w2_ov_cr_im_pp \
  d256_m128_n64_s2_w2_ov_cr_im_as_pp_ps_causal d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_q3_dy_qr \
  d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_os_dy_qr \
  d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_dy_qr \
  d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_os_qr_causal \
  d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_q3_qr \
  d64_m128_n128_s2_w2_ov_hb_pp_ps_xt_qw_q3_qr_causal \
  d64_m128_n128_s2_w2_ov_cr_hb_pp_ps_xt_qw_q3_qr_causal \
  d64_m128_n128_s2_w2_ov_cr_im_hb_pp_ps_xt_qw_q3_causal d128_m128_n128_s2_w2_ov_ls_pp_ps_xt \
  d128_m128_n128_s2_w2_ov_cr_ls_pp_ps_xt_qw_causal d128_m128_n128_s2_w2_ov_cr_ls_pp_ps_xt_qw \
  d128_m128_n128_s2_w2_ov_cr_ls_pp_ps_xt_qw_os_causal \
  d128_m128_n128_s2_w2_ov_cr_ls_hb_pp_ps_xt_qw_causal \
  d64_m192_n128_s2_w3_ov_cr_ls_pp_ps_xt_qw_q3_causal d64_m192_n128_s2_w3_ov_cr_ls_pp_ps_causal \
  d64_m192_n128_s2_w3_ov_cr_ls_pp_ps_xt_qw_q3 d64_m192_n128_s2_w3_ov_cr_ls_pp_ps_xt_qw \
  d64_m128_n128_s2_w2_ov_cr_ls_hb_pp_ps_xt_qw_q3_causal \
  d64_m128_n128_s2_w2_ov_cr_ls_hb_pp_ps_xt_qw_q3_qr_causal \
  d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_dy_qr \
  d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_os_dy_qr \
  d64_m192_n128_s2_w3_ov_cr_im_ls_pp_ps_xt_qw_q3_causal \
  d64_m192_n128_s2_w3_ov_cr_im_ls_pp_ps_xt_qw_q3 \
  d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_os_qr \
  d128_m128_n128_s2_w2_ov_cr_im_ls_hb_pp_ps_xt_qw_causal \
  d64_m192_n128_s2_w3_ov_cr_im_ls_pp_ps_xt_qw \
  d64_m128_n128_s2_w2_ov_cr_im_ls_hb_pp_ps_xt_qw_q3_qr_causal \
  d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_qr_causal \
  d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_os_qr_causal \
  d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_qr_causal

FWD_LAB_KERNELS := $(filter-out $(FWD_PRODUCTION_KERNELS),\
  $(foreach dtype,f16 bf16,$(addprefix fa3_fwd_$(dtype)_,$(FWD_LAB_TILES))))

# The backward kernels (src/kernels/bwd_config.h is their grammar): one per dtype, head dim and
# mask, and two for d128 non-causal: 64-row query blocks below 1024 query rows, _dqt's 80-row
# blocks (persistent, _pt; rotated walk and first stores, _rw_fs) from there; d128 causal the
# persistent _pt at every length (since v91; docs/perf-history.md v36, v44b, v90b');
# _fs (a query block's first dQ writer stores, the others add) where it pays: causal
# d128 and d256, with _rw every non-causal pick from 1024 query rows (v37). All in the production
# set, each a built-in tuning table bwd pick (test_registry.cpp checks that every bwd pick is here
# and every kernel here a pick; a backward call whose table has no bwd entry for its key runs the
# first that fits). Each cubin also holds the call's preprocess and postprocess kernels, and the
# d64 causal ones the _lf entry of their ordered causal calls (BwdConfig::causal_last_first).
BWD_PRODUCTION_KERNELS := \
  fa3_bwd_f16_d64_m128_n128_s2_w2_dqq_rw_fs fa3_bwd_f16_d64_m128_n128_s2_w2_dqq_pt_causal \
  fa3_bwd_f16_d128_m64_n128_s2_w2_dqh fa3_bwd_f16_d128_m80_n128_s2_w2_dqt_rw_fs_pt \
  fa3_bwd_f16_d128_m64_n128_s2_w2_dqh_fs_pt_causal \
  fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_rw_fs fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_pt_causal \
  fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh fa3_bwd_bf16_d128_m80_n128_s2_w2_dqt_rw_fs_pt \
  fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_fs_pt_causal \
  fa3_bwd_f16_d256_m64_n80_s1_w2_kvt_dqh_rw_fs fa3_bwd_f16_d256_m64_n80_s1_w2_kvt_dqh_fs_causal \
  fa3_bwd_bf16_d256_m64_n80_s1_w2_kvt_dqh_rw_fs fa3_bwd_bf16_d256_m64_n80_s1_w2_kvt_dqh_fs_causal

# Backward variants explored and kept for the lab build: the key split of dQ (each consumer
# warpgroup adds its own dQ_i over its 64 keys: two fp32 parts a step, v26a/b in
# docs/perf-history.md) at d64 with 64-row query blocks (at d128 it needs the dQ accumulator next
# to dK and dV, and ptxas serializes its wgmmas); _kvh at d256 (v26f-v27); d128 causal with a CTA
# per tile at setmaxnreg 24/240, with and without _fs at 32/232 (_p32; _fs_p32 was the pick from
# 6144 query rows until v91: v28l, v36b, v44b, v90b'); d128 causal with _dqt's 80-row blocks (0.96-1.00 of
# the _p32 kernels, v29f; at 32/232 it spills); d64 non-causal without _rw (each CTA walks the
# query blocks from the first, v33b); d64 causal without _pt (a CTA per tile; the persistent _pt
# is 1-3% faster from 1k to 4k, v34a, and level or ahead from 12k since v46f, v47b); d64
# non-causal with _pt (3-8% slower than a CTA per tile, v34a); d128 non-causal _dqt with a CTA per
# tile (the persistent _dqt_pt is 1% faster from 1k to 8k, v36c); the production picks without _fs
# (their dQ accumulator zeroed by the preprocess; _fs is 2-9% faster at 1k-2k, level from 8k,
# v37), and d128 and d256 non-causal without _rw_fs (_rw_fs is 1-5% faster to 4k, v37e, v37f).
BWD_LAB_KERNELS := \
  fa3_bwd_f16_d128_m64_n128_s2_w2_dqh_fs_p32_causal fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_fs_p32_causal \
  fa3_bwd_f16_d64_m128_n128_s2_w2_dqq_rw fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_rw \
  fa3_bwd_f16_d128_m64_n128_s2_w2_dqh_pt_causal fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_pt_causal \
  fa3_bwd_f16_d128_m64_n128_s2_w2_dqh_p32_causal fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_p32_causal \
  fa3_bwd_f16_d256_m64_n80_s1_w2_kvt_dqh_causal fa3_bwd_bf16_d256_m64_n80_s1_w2_kvt_dqh_causal \
  fa3_bwd_f16_d128_m80_n128_s2_w2_dqt_pt fa3_bwd_bf16_d128_m80_n128_s2_w2_dqt_pt \
  fa3_bwd_f16_d256_m64_n80_s1_w2_kvt_dqh fa3_bwd_bf16_d256_m64_n80_s1_w2_kvt_dqh \
  fa3_bwd_f16_d64_m128_n128_s2_w2_dqq fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq \
  fa3_bwd_f16_d64_m128_n128_s2_w2_dqq_causal fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_causal \
  fa3_bwd_f16_d64_m128_n128_s2_w2_dqq_rw_pt fa3_bwd_bf16_d64_m128_n128_s2_w2_dqq_rw_pt \
  fa3_bwd_f16_d128_m64_n128_s2_w2_dqh_causal fa3_bwd_bf16_d128_m64_n128_s2_w2_dqh_causal \
  fa3_bwd_f16_d128_m80_n128_s2_w2_dqt_causal fa3_bwd_bf16_d128_m80_n128_s2_w2_dqt_causal \
  fa3_bwd_f16_d128_m80_n128_s2_w2_dqt fa3_bwd_bf16_d128_m80_n128_s2_w2_dqt \
  fa3_bwd_f16_d64_m64_n128_s2_w2 fa3_bwd_f16_d64_m64_n128_s2_w2_causal \
  fa3_bwd_bf16_d64_m64_n128_s2_w2 fa3_bwd_bf16_d64_m64_n128_s2_w2_causal \
  fa3_bwd_f16_d256_m64_n64_s1_w2_kvh_dqh fa3_bwd_f16_d256_m64_n64_s1_w2_kvh_dqh_causal \
  fa3_bwd_bf16_d256_m64_n64_s1_w2_kvh_dqh fa3_bwd_bf16_d256_m64_n64_s1_w2_kvh_dqh_causal
