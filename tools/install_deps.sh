#!/usr/bin/env bash
# `make deps`: make sure the build's dependencies are present, installing Debian's packages
# when they are missing. Prints one clear sentence and fails when it cannot.
set -u
CXX=${CXX:-g++}
NVCC=${NVCC:-nvcc}

have_header() { echo "#include <$1>" | "$CXX" -std=c++17 -E -x c++ - >/dev/null 2>&1; }

missing=()
have_header catch2/catch.hpp || missing+=(catch2)
have_header nlohmann/json.hpp || missing+=(nlohmann-json3-dev)

if [ ${#missing[@]} -gt 0 ]; then
  echo "make deps: installing ${missing[*]} (Debian packages)"
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "make deps: ${missing[*]} missing and there is no apt-get here; install the headers catch2/catch.hpp (Catch2 2.13) and nlohmann/json.hpp by hand." >&2
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
