# The kernels compiled into libfa3, by name. A name is the whole config of its kernel
# (grammar in src/runtime/kernel_registry.h); the Makefile derives compile definitions
# from it. Add a config here to build it; the tuning table decides when it runs.
#   _ov  intra-warpgroup 2-stage GEMM-softmax pipelining (paper Algorithm 2)
#   _ov3 3-stage pipelining (paper Algorithm 4, kept for the comparison the paper makes):
#        a second S and P in registers; fits d128 up to n80 (n96 spills)
#   _p2  with overlap: P in two register buffers, no wait_group 0 in the loop (needs
#        block_n/4 more registers: fits d64 n128 and d128 n112 (n96 causal), spills at
#        d128 n128 and d256)
#   _b2  with overlap: the 2-stage loop in the order of the paper's Appendix B.2 SASS
#        (softmax first, the next QK^T and this block's PV issued after it, one wait);
#        measured 1-5% slower than the default order, kept for fa3-sass's B.2 check
#   _cr  a row max is kept until it grows by more than 2^8 (FlashAttention-4's lazy rescale),
#        and O is rescaled only then (a warp vote skips the multiplies): since v13 +1-3% at
#        d256, +0.4-0.8% at d128 causal, -1.5 to -4% at d64 (bench/NOTES.md v7, v13); at d64
#        w3 with _ls, +1-1.8% causal from 2k, +2.5% fp16 non-causal 16k (v22)
#   _im  with _cr: a block's row maxima by a 3-input integer max (VIMNMX3) of the scores' bit
#        patterns, exact for the lazy test while a warp's rows keep m >= -8 (bench/NOTES.md v23)
#   _ew  a step's exponentials wait for its PV GEMM (only the row max runs under it), where
#        ptxas put that wait after the first exponentials (d128 n128 _ps, the _c2 ones); the
#        plain d128 n128 one, whose wait is after the row max already, is the control.
#        Measured: no consistent effect (+-2%, the control 1-6% slower; bench/NOTES.md v9)
#   _as  key blocks visited first to last (the causal diagonal last), so that causal CTAs
#        started together on one head ask for the same K/V block at about the same moment,
#        as non-causal ones do. Measured: no fewer L2 sector reads, times within noise at
#        d128/d64, +1.5-3% at d256 n64 persistent causal (bench/NOTES.md v9)
#   _hb  a block whose upper half is masked for a warpgroup (the causal diagonal's upper-right
#        quadrant) gets a half-width QK^T and softmax, and PV where possible: +0.7-1.5% for
#        d128 _pp_ps causal at 512-2k, +-0.2% for d128 _xt_qw causal; d64 m128 s2 _xt_qw
#        +1-3% over the s3 kernel at 1k-4k. The d64 m128 s3, w3 and the _cr / _as d128
#        _xt_qw twins make ptxas serialize their wgmmas, so they are not built (NOTES v13);
#        with _cr and _ls together it does not: d128 _cr_ls_hb, +0.1-1.6% over _cr_ls at 1k-16k,
#        the causal pick from 768 (NOTES v19), and d64 m128 s2 _cr_ls_hb (_q3, _qr), +1.5-2.3%
#        at 512-1k (v22); with _ls alone it does
#   _ls  the softmax row sums by the PV GEMM (N = head_dim + 8 against ones stored after each
#        V stage) instead of FADDs: d128 non-causal +0.6-1.9%, causal +0.1-0.7% (fa3-tune's
#        margins), d64 w3 none alone (N = 72), but with _cr (above); eight separate m64n8k16
#        GEMMs were 5-9% slower (NOTES v14)
#   _pp  pingpong scheduling of the consumer warpgroups (paper Section 3.1); the d256 `_cr`
#        kernels without it are the public FA3's choice at d256 (its softmax is a quarter of
#        the GEMM time there, not half): +-1% non-causal, +2.5-4% causal n80 at 2k-8k
#   _ps  persistent grid: one CTA per SM walks the tiles (causal: dynamically, through an
#        atomic counter, longest first in L2-sized head groups), O in its own tile so
#        the next Q loads under the epilogue where that fits (d64, d128 n128); elsewhere
#        (d256, d128 n176) O goes over Q: non-causal d256 was 10-20% slower so, and only
#        the causal d256 ones are built. Since v11 (the K/V stage state warp-uniform per
#        tile) a persistent key block costs what a one-CTA-per-tile one does (+1% at d128,
#        was +6%) and the public FA3's tiles (d64 w3 n128 causal, d256 n80 causal, no
#        pingpong) and d128 n176 compile without spills; d64 192 x 192 still spills
#        (bench/NOTES.md v11)
#   _xt  with _ps: a tile's last PV GEMM goes out with the next tile's first QK^T and its
#        epilogue runs under the next tile's first softmax (Q double-buffered, O over Q):
#        the per-tile cost of a persistent kernel is ~1 key block at d128 (bench/NOTES.md
#        v9). Fits d128 n128 and d64 w2 / w3 (w3 n128 without spills since v10), not d256.
#        Measured: d128 non-causal +5-8% over _ps (and above one CTA per tile everywhere),
#        d64 m128 s3 causal +2.5-10%; -2 to -10% for d128 causal up to 4k and d64 w3 causal
#   _qw  with _xt: Q loaded (and the dynamic scheduler's tiles drawn) by a producer warp of
#        its own, as soon as a Q buffer frees: the twin of every _xt kernel (bench/NOTES.md
#        v10). Against _xt: d64 m128 non-causal +4-14%, d128 causal +1-2.6%, d64 w3 n112
#        causal +2-4%, d128 non-causal the same, d64 m128 s3 causal -1.3 to -4% (measured
#        before the warp-uniform change; fa3-tune picks _qw after it for d128 causal 1k-12k,
#        d64 causal 1k-8k and some non-causal lengths)
#   _q3  with _qw: three Q buffers; the one a tile's O is stored from is handed back by the
#        storing thread in the next tile's epilogue, so no warp waits for the store's read,
#        and the next Q loads a tile ahead: +0.5-1.8% d64 causal, +0.4-1.5% d128 causal.
#        Fits d64 (with _ls too) and d128 without _ls (three 32 KB Q buffers, four 32 KB K/V
#        stages at d128)
#   _os  with _qw (two Q buffers): the Q warp stores each tile's O; the consumers write it to
#        shared memory and go on, where they waited for the store to read it (the wait _q3
#        moves a tile later, without room for _ls at d128): d128 _cr_ls causal +0.8-1% at 2k,
#        +0.2% at 4k, -0.2 to -0.75% from 8k; picked at 1.5k-6k (bench/NOTES.md v19)
#   _dy  persistent non-causal: tiles drawn from the launch's counter in the static walk's
#        order (as causal persistent kernels do), not CTA i taking i, i + grid, ...
#        (bench/NOTES.md v17)
#   _qr  with _xt: QK^T with Q from registers (RS-wgmma), loaded once per tile: less shared-
#        memory traffic per key block (bench/NOTES.md v21); d64 _cr_ls_hb_..._os_qr makes
#        ptxas serialize its wgmmas (not built)
#   _ef  Q loads and O stores with the L2 evict-first policy, _el K/V loads evict-last: the
#        bytes used once leave L2 first, the K/V that other query blocks read again last
#        (bench/NOTES.md v21)
#   _c2  clusters of 2 CTAs on neighbouring query blocks of one head: each loads half of
#        every K/V block and TMA multicasts it into both (non-causal, not persistent);
#        measured 5-16% slower up to 4k, within 2% from 8k (bench/NOTES.md v8)
# s3 (3 K/V stages) fits d64 (persistent too) and d128 n128 (not persistent), not d256;
# measured the same as s2 except the d64 causal persistent kernels (1-4% faster), so only
# those are built (bench/NOTES.md v8).
#   _nows no warp specialization (paper Table 2 ablation): no producer warpgroup

# The production set: what `make` builds into libfa3 (and so `make test`, CI and every tool of
# build/). It is the kernels the built-in tuning table picks plus the reference kernels of
# the paper's Table 2 ablation (fp16, d128, 128 x 128 tiles: Algorithm 1 without pipelining,
# with 2-stage pipelining with and without pingpong, pipelining without warp specialization)
# and of fa3-sass's Appendix B.2 check (_ov_b2_pp). test/test_registry.cpp fails when a table
# kernel is missing here or when the list grows past kProductionForwardBudget.
FWD_PRODUCTION_KERNELS := \
  fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_dy_qr \
  fa3_fwd_bf16_d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_os_dy_qr \
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
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_os_dy_qr \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_os_qr \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_os_qr_causal \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_q3_qr_causal \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_q3_qr_causal \
  fa3_fwd_f16_d256_m128_n64_s2_w2_ov_cr_as_pp_ps_causal \
  fa3_fwd_f16_d256_m128_n64_s2_w2_ov_cr_im_as_pp_ps_causal \
  fa3_fwd_f16_d256_m128_n64_s2_w2_ov_cr_im_pp \
  fa3_fwd_f16_d256_m128_n64_s2_w2_ov_cr_pp \
  fa3_fwd_f16_d256_m128_n80_s2_w2_ov_cr_as_ps_causal \
  fa3_fwd_f16_d256_m128_n80_s2_w2_ov_cr_im_as_ps_causal \
  fa3_fwd_f16_d64_m128_n128_s2_w2_ov_cr_ls_hb_pp_ps_xt_qw_q3_qr_causal \
  fa3_fwd_f16_d64_m192_n128_s2_w3_ov_cr_im_ls_pp_ps_xt_qw_q3 \
  fa3_fwd_f16_d64_m192_n128_s2_w3_ov_cr_im_ls_pp_ps_xt_qw_q3_causal \
  \
  fa3_fwd_f16_d128_m128_n128_s2_w2 \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov_pp \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov_nows \
  fa3_fwd_f16_d128_m128_n128_s2_w2_ov_b2_pp

# The lab: every variant measured on the way (bench/NOTES.md), built on demand by `make lab`
# into build/lab/ (its own libfa3 and tools: fa3-tune searches it, fa3-bench --all-configs and
# --ablation time it, fa3-sass inspects it). A lab kernel that wins is promoted by adding its
# name to FWD_PRODUCTION_KERNELS (and to the tuning table).
FWD_LAB_TILES := \
  d64_m128_n128_s2_w2 d64_m128_n128_s2_w2_causal \
  d64_m128_n128_s2_w2_ov_pp d64_m128_n128_s2_w2_ov_pp_causal \
  d64_m192_n128_s2_w3_ov_pp d64_m192_n128_s2_w3_ov_pp_causal \
  d64_m192_n128_s2_w3_ov_pp_ps d64_m128_n128_s2_w2_ov_pp_ps_causal d64_m192_n112_s2_w3_ov_pp_ps_causal \
  d64_m128_n128_s2_w2_ov_p2_pp d64_m128_n128_s2_w2_ov_p2_pp_causal \
  d128_m128_n128_s2_w2 d128_m128_n128_s2_w2_causal \
  d128_m128_n128_s2_w2_ov d128_m128_n128_s2_w2_ov_causal \
  d128_m128_n128_s2_w2_ov_pp d128_m128_n128_s2_w2_ov_pp_causal \
  d128_m128_n128_s2_w2_ov_b2 d128_m128_n128_s2_w2_ov_b2_pp d128_m128_n128_s2_w2_ov_b2_pp_causal \
  d128_m128_n176_s2_w2_ov_pp d128_m128_n176_s2_w2_ov_pp_causal \
  d128_m128_n128_s2_w2_ov_pp_ps d128_m128_n128_s2_w2_ov_pp_ps_causal \
  d128_m128_n112_s2_w2_ov_pp d128_m128_n112_s2_w2_ov_pp_causal \
  d128_m128_n112_s2_w2_ov_p2_pp d128_m128_n96_s2_w2_ov_p2_pp_causal \
  d128_m128_n64_s2_w2_ov3_pp d128_m128_n80_s2_w2_ov3_pp d128_m128_n64_s2_w2_ov3_pp_causal \
  d128_m128_n128_s2_w2_ov_nows d128_m128_n128_s2_w2_ov_nows_causal \
  d256_m128_n64_s2_w2 d256_m128_n64_s2_w2_causal \
  d256_m128_n64_s2_w2_ov_pp d256_m128_n64_s2_w2_ov_pp_causal \
  d256_m128_n80_s2_w2_ov_pp d256_m128_n80_s2_w2_ov_pp_causal \
  d64_m192_n128_s2_w3_ov_cr_pp d64_m192_n128_s2_w3_ov_cr_pp_ps \
  d64_m128_n128_s2_w2_ov_cr_pp_ps_causal d64_m192_n112_s2_w3_ov_cr_pp_ps_causal \
  d256_m128_n64_s2_w2_ov_cr_pp d256_m128_n64_s2_w2_ov_cr_pp_causal \
  d256_m128_n80_s2_w2_ov_cr_pp d256_m128_n80_s2_w2_ov_cr_pp_causal \
  d64_m192_n128_s2_w3_ov_cr_pp_c2 d128_m128_n128_s2_w2_ov_pp_c2 d128_m128_n176_s2_w2_ov_pp_c2 \
  d256_m128_n80_s2_w2_ov_cr_pp_c2 \
  d64_m128_n128_s3_w2_ov_pp_ps_causal d64_m192_n112_s3_w3_ov_pp_ps_causal \
  d64_m192_n112_s3_w3_ov_cr_pp_ps_causal \
  d256_m128_n64_s2_w2_ov_pp_ps_causal d256_m128_n64_s2_w2_ov_cr_pp_ps_causal \
  d128_m128_n128_s2_w2_ov_as_pp_ps_causal d128_m128_n128_s2_w2_ov_as_pp_causal \
  d64_m192_n112_s2_w3_ov_as_pp_ps_causal d64_m128_n128_s3_w2_ov_as_pp_ps_causal \
  d256_m128_n64_s2_w2_ov_cr_as_pp_ps_causal d256_m128_n80_s2_w2_ov_cr_as_pp_causal \
  d128_m128_n128_s2_w2_ov_pp_ps_xt d128_m128_n128_s2_w2_ov_pp_ps_xt_causal \
  d128_m128_n128_s2_w2_ov_as_pp_ps_xt_causal d64_m128_n128_s3_w2_ov_pp_ps_xt_causal \
  d64_m192_n112_s2_w3_ov_pp_ps_xt_causal \
  d256_m128_n80_s2_w2_ov_cr d256_m128_n80_s2_w2_ov_cr_causal \
  d256_m128_n64_s2_w2_ov_cr_ps_causal d256_m128_n64_s2_w2_ov_cr_as_ps_causal \
  d64_m128_n128_s2_w2_ov_pp_ps d64_m128_n128_s2_w2_ov_pp_ps_xt \
  d128_m128_n128_s2_w2_ov_ew_pp_ps d128_m128_n128_s2_w2_ov_ew_pp_ps_xt \
  d128_m128_n176_s2_w2_ov_ew_pp_c2 d128_m128_n128_s2_w2_ov_ew_pp \
  d128_m128_n128_s2_w2_ov_pp_ps_xt_qw d128_m128_n128_s2_w2_ov_pp_ps_xt_qw_causal \
  d128_m128_n128_s2_w2_ov_as_pp_ps_xt_qw_causal d64_m128_n128_s3_w2_ov_pp_ps_xt_qw_causal \
  d64_m192_n112_s2_w3_ov_pp_ps_xt_qw_causal d64_m128_n128_s2_w2_ov_pp_ps_xt_qw \
  d128_m128_n128_s2_w2_ov_ew_pp_ps_xt_qw \
  d256_m128_n80_s2_w2_ov_cr_ps_causal d256_m128_n80_s2_w2_ov_cr_as_ps_causal \
  d64_m192_n128_s2_w3_ov_pp_ps_causal d64_m192_n128_s2_w3_ov_pp_ps_xt_qw_causal \
  d64_m192_n128_s2_w3_ov_pp_ps_xt_qw \
  d128_m128_n176_s2_w2_ov_pp_ps d128_m128_n176_s2_w2_ov_pp_ps_causal \
  d64_m128_n176_s2_w2_ov_pp_ps_xt_qw_causal \
  d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_causal d128_m128_n128_s2_w2_ov_cr_as_pp_ps_xt_qw_causal \
  d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw d128_m128_n176_s2_w2_ov_cr_pp_ps \
  d128_m128_n128_s2_w2_ov_hb_pp_ps_xt_qw_causal \
  d128_m128_n128_s2_w2_ov_hb_pp_ps_causal \
  d64_m128_n128_s2_w2_ov_hb_pp_ps_xt_qw_causal \
  d128_m128_n128_s2_w2_ov_ls_pp_ps_xt d128_m128_n128_s2_w2_ov_cr_ls_pp_ps_xt_qw_causal \
  d128_m128_n128_s2_w2_ov_cr_ls_pp_ps_xt_qw \
  d64_m128_n128_s2_w2_ov_hb_pp_ps_xt_qw_q3_causal d64_m192_n128_s2_w3_ov_pp_ps_xt_qw_q3_causal \
  d64_m192_n128_s2_w3_ov_pp_ps_xt_qw_q3 d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_q3_causal \
  d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_q3 \
  d128_m128_n128_s2_w2_ov_ls_pp_ps_xt_dy d128_m128_n128_s2_w2_ov_cr_ls_pp_ps_xt_qw_dy \
  d128_m128_n128_s2_w2_ov_cr_ls_pp_ps_xt_qw_os_causal d128_m128_n128_s2_w2_ov_cr_ls_pp_ps_xt_qw_os_dy \
  d128_m128_n128_s2_w2_ov_cr_ls_pp_ps_xt_qw_os d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_os_causal \
  d128_m128_n128_s2_w2_ov_cr_ls_hb_pp_ps_xt_qw_causal d128_m128_n128_s2_w2_ov_cr_ls_hb_pp_ps_xt_qw_os_causal \
  d128_m128_n128_s2_w2_ov_cr_ls_pp_ps_xt_qw_dy_qr d128_m128_n128_s2_w2_ov_cr_ls_pp_ps_xt_qw_qr_causal \
  d128_m128_n128_s2_w2_ov_cr_ls_hb_pp_ps_xt_qw_os_qr_causal d128_m128_n128_s2_w2_ov_cr_ls_pp_ps_xt_qw_os_dy_qr \
  d128_m128_n128_s2_w2_ov_cr_ls_pp_ps_xt_qw_os_qr d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_q3_qr_causal \
  d128_m128_n128_s2_w2_ov_cr_pp_ps_xt_qw_q3_qr \
  d128_m128_n128_s2_w2_ov_cr_ls_hb_pp_ps_xt_qw_os_qr_ef_el_causal d128_m128_n128_s2_w2_ov_cr_ls_pp_ps_xt_qw_dy_qr_ef_el \
  d64_m192_n128_s2_w3_ov_cr_ls_pp_ps_xt_qw_q3_causal d64_m192_n128_s2_w3_ov_cr_ls_pp_ps_causal \
  d64_m192_n128_s2_w3_ov_cr_ls_pp_ps_xt_qw_q3 d64_m192_n128_s2_w3_ov_cr_ls_pp_ps_xt_qw \
  d64_m128_n128_s2_w2_ov_cr_ls_hb_pp_ps_xt_qw_q3_causal d64_m128_n128_s2_w2_ov_cr_ls_hb_pp_ps_xt_qw_q3_qr_causal \
  d128_m128_n128_s2_w2_ov_cr_im_ls_hb_pp_ps_xt_qw_os_qr_causal d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_dy_qr \
  d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_os_dy_qr \
  d256_m128_n64_s2_w2_ov_cr_im_pp d256_m128_n80_s2_w2_ov_cr_im_as_ps_causal \
  d64_m192_n128_s2_w3_ov_cr_im_ls_pp_ps_xt_qw_q3_causal d64_m192_n128_s2_w3_ov_cr_im_ls_pp_ps_xt_qw_q3 \
  d128_m128_n128_s2_w2_ov_cr_im_pp_ps_xt_qw_q3_qr_causal d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_os_qr \
  d128_m128_n128_s2_w2_ov_cr_im_ls_hb_pp_ps_xt_qw_causal \
  d256_m128_n80_s2_w2_ov_cr_im_pp d256_m128_n64_s2_w2_ov_cr_im_as_pp_ps_causal \
  d64_m192_n128_s2_w3_ov_cr_im_ls_pp_ps_xt_qw d64_m128_n128_s2_w2_ov_cr_im_ls_hb_pp_ps_xt_qw_q3_qr_causal \
  d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_qr_causal d128_m128_n128_s2_w2_ov_cr_im_ls_pp_ps_xt_qw_os_qr_causal

FWD_LAB_KERNELS := $(filter-out $(FWD_PRODUCTION_KERNELS),\
  $(foreach dtype,f16 bf16,$(addprefix fa3_fwd_$(dtype)_,$(FWD_LAB_TILES))))
