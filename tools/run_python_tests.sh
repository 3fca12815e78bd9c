#!/usr/bin/env bash
# Runs the Python binding's tests (python/tests) against this tree's libfa3.so.
#
#   tools/run_python_tests.sh [pytest arguments...]
#
# FA3_LIBRARY defaults to build/libfa3.so (override: FA3_LIBRARY=... or BUILD=build-x);
# PYTHON defaults to the first of python3, /usr/bin/python3 that has pytest. Without PyTorch, CUDA or a Hopper GPU the GPU tests skip with
# the reason; the library, header-mirror and tuning-table tests run everywhere. FA3_REQUIRE_GPU=1
# (tools/gpu-check.sh sets it) makes that, or a missing pytest, fail the run instead.
set -eu
cd "$(dirname "$0")/.."

# The first interpreter with pytest: $PYTHON if set, else python3, else the system's
# /usr/bin/python3 (where Debian's python3-pytest installs when python3 is a pyenv one).
if [ -z "${PYTHON:-}" ]; then
  PYTHON=python3
  if ! python3 -c "import pytest" 2>/dev/null && [ -x /usr/bin/python3 ] &&
     /usr/bin/python3 -c "import pytest" 2>/dev/null; then
    PYTHON=/usr/bin/python3
  fi
fi
BUILD=${BUILD:-build}
export FA3_LIBRARY=${FA3_LIBRARY:-$PWD/$BUILD/libfa3.so}

if ! "$PYTHON" -c "import pytest" 2>/dev/null; then
  echo "SKIPPED: python tests: pytest is not installed for $PYTHON" \
       "(Debian: apt-get install python3-pytest; or pip install pytest)"
  # FA3_REQUIRE_GPU=1 (the GPU machine's runs): nothing run is a failure there.
  [ "${FA3_REQUIRE_GPU:-}" = 1 ] && exit 1
  exit 0
fi
if [ ! -f "$FA3_LIBRARY" ]; then
  echo "note: $FA3_LIBRARY does not exist (run make first); tests that need it will skip"
fi
echo "python tests: $("$PYTHON" --version 2>&1), FA3_LIBRARY=$FA3_LIBRARY"
# The run is quiet already (-q): a -q of the caller's would make it -qq, which drops pytest's
# summary line (its passed / skipped counts), so it is left out.
args=()
for arg in "$@"; do [ "$arg" = -q ] || args+=("$arg"); done
# -p no:cacheprovider: no .pytest_cache left in the source tree; -rs: print skip reasons.
exec "$PYTHON" -m pytest -q -rs -p no:cacheprovider python/tests ${args[@]+"${args[@]}"}
