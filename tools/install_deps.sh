#!/usr/bin/env bash
# `make deps`: make sure the build's dependencies are present, installing Debian's packages
# when they are missing. Prints one clear sentence and fails when it cannot.
set -u
CXX=${CXX:-g++}
NVCC=${NVCC:-nvcc}

have_header() { echo "#include <$1>" | "$CXX" -std=c++17 -E -x c++ - >/dev/null 2>&1; }

# pytest runs the Python binding's tests (tools/run_python_tests.sh looks in python3 and in
# Debian's /usr/bin/python3, where python3-pytest installs).
have_pytest() {
  python3 -c "import pytest" >/dev/null 2>&1 ||
    { [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import pytest" >/dev/null 2>&1; }
}

missing=()
have_header catch2/catch.hpp || missing+=(catch2)
have_header nlohmann/json.hpp || missing+=(nlohmann-json3-dev)
have_pytest || missing+=(python3-pytest)

if [ ${#missing[@]} -gt 0 ]; then
  echo "make deps: installing ${missing[*]} (Debian packages)"
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "make deps: ${missing[*]} missing and there is no apt-get here; install Catch2 2.13 (catch2/catch.hpp), nlohmann/json.hpp and pytest by hand." >&2
    exit 1
  fi
  if [ "$(id -u)" = 0 ]; then sudo=""; elif command -v sudo >/dev/null 2>&1; then sudo="sudo -n"; else
    echo "make deps: ${missing[*]} missing and this user cannot run apt-get (not root, no sudo); run: apt-get install ${missing[*]}" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  if ! $sudo apt-get install -y -q "${missing[@]}" >/dev/null 2>&1; then
    $sudo apt-get update -q >/dev/null 2>&1
    if ! $sudo apt-get install -y -q "${missing[@]}"; then
      echo "make deps: apt-get could not install ${missing[*]}; install them by hand (Debian/Ubuntu: apt-get install ${missing[*]})." >&2
      exit 1
    fi
  fi
  for h in catch2/catch.hpp nlohmann/json.hpp; do
    have_header "$h" || { echo "make deps: <$h> is still not found after installing ${missing[*]}." >&2; exit 1; }
  done
fi

if ! command -v "$NVCC" >/dev/null 2>&1; then
  echo "make deps: nvcc not found (looked for '$NVCC'); install the CUDA 13 toolkit or set CUDA_HOME=/path/to/cuda." >&2
  exit 1
fi
exit 0
