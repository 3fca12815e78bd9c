#!/usr/bin/env bash
# v79: the host-path and test changes of this session on the GPU (no kernel changed: all 64
# cubins are the bytes of v77's library).
#   a: every [gpu] test but [large] (the forward's shapes now with o in a packed q/k/v/o
#      buffer), then the Python suite (gradients the binding allocates now poisoned).
#   b: the [large] tests (a new one: K and V past 2^31 elements), then whether the captured
#      torch.autograd.grad(..., dout) form fails for PyTorch's own attention too.
#   c: those forms and two more, with an eager call on the default stream first.
#   d: v78's failing Python graph test, alone and in its file.
#   e: the layer tests after a rename in tile/.
#   f: every GPU test and Python after the closing review's host mends.
set -u
. docs/runs/gpu_run.sh
gpu_run_header build/libfa3.so build/fa3_tests
case ${1:-a} in
  a)
    step tests 450 build/fa3_tests '[gpu]~[large]'
    step python 90 tools/run_python_tests.sh -q ;;
  b)
    step large 300 build/fa3_tests '[gpu][large]'
    step graph_grad_form 200 env FA3_LIBRARY="$PWD/build/libfa3.so" PYTHONPATH=python \
      python3 docs/runs/2026-11-28-v79/graph_grad_form.py ;;
  c)  # the graph forms again, with v78's eager call on the default stream first
    step graph_grad_form 250 env FA3_LIBRARY="$PWD/build/libfa3.so" PYTHONPATH=python \
      python3 docs/runs/2026-11-28-v79/graph_grad_form.py ;;
  d)  # v78's failing test file (commit 7db1639's, kept here) in pytest: its graph tests
      # alone, then the whole file
    cp python/tests/test_backward.py /tmp/test_backward_now.py
    cp docs/runs/2026-11-28-v79/test_backward_7db1639.py python/tests/test_backward.py
    step v78_graph_alone 120 env FA3_LIBRARY="$PWD/build/libfa3.so" \
      python3 -m pytest -q -p no:cacheprovider python/tests/test_backward.py -k cuda_graph
    step v78_file 200 env FA3_LIBRARY="$PWD/build/libfa3.so" \
      python3 -m pytest -q -p no:cacheprovider python/tests/test_backward.py
    cp /tmp/test_backward_now.py python/tests/test_backward.py ;;
  e)  # after tile/'s GEMMs were renamed (production cubins byte-identical): the layer tests,
      # whose kernels fa3_tests compiles itself
    step layers 200 build/fa3_tests '[gpu][layers]' ;;
  f)  # after the closing review's two host mends (check_strides; backward_launch's own
      # helpers): every [gpu] test, then Python
    step tests 400 build/fa3_tests '[gpu]~[large]'
    step large 150 build/fa3_tests '[gpu][large]'
    step python 60 tools/run_python_tests.sh -q ;;
esac
