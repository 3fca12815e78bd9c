"""Finding libfa3.so and declaring its C API (include/fa3/fa3.h) for ctypes.

Nothing in this module needs PyTorch, a GPU or even the library itself at import time:
the library is located and loaded on the first call that needs it (``get_library()``),
so ``import fa3`` works everywhere and a missing library is reported when it matters.

Where the library is looked for, first hit wins:

1. ``$FA3_LIBRARY`` - a path (or a bare soname for the loader). When set, it is the only
   candidate: a user who names a library must get that one or an error, never another.
2. ``libfa3.so`` next to this package (a wheel or a copy that ships the library inside).
3. ``build/libfa3.so`` of the source tree this package lives in (``python/fa3`` ->
   ``../../build``), i.e. what ``make`` just built.
4. The dynamic loader: ``dlopen("libfa3.so")`` (LD_LIBRARY_PATH, rpath, ld.so.cache), then
   ``ctypes.util.find_library("fa3")``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import enum
import os
import re
import threading
from ctypes import POINTER, c_char_p, c_float, c_int, c_int64, c_size_t, c_void_p
from pathlib import Path
from typing import Callable, Mapping, Optional

from .errors import Fa3Error, LibraryNotFoundError, MissingFunctionError

LIBRARY_ENV_VAR = "FA3_LIBRARY"
LIBRARY_FILE_NAME = "libfa3.so"
_PACKAGE_DIR = Path(__file__).resolve().parent


# ---- the C types, mirrored field by field (python/tests/test_library.py checks them
# ---- against the header) -------------------------------------------------------------


class Status(enum.IntEnum):
    """fa3_status: what every C API function returns."""

    FA3_OK = 0
    FA3_ERR_INVALID_ARGUMENT = 1
    FA3_ERR_UNSUPPORTED = 2
    FA3_ERR_NO_DRIVER = 3
    FA3_ERR_NO_DEVICE = 4
    FA3_ERR_ARCH = 5
    FA3_ERR_TUNING_TABLE = 6
    FA3_ERR_CUDA = 7
    FA3_ERR_OUT_OF_MEMORY = 8
    FA3_ERR_INTERNAL = 9


class DType(enum.IntEnum):
    """fa3_dtype: element type of a tensor."""

    FA3_F16 = 0
    FA3_BF16 = 1
    FA3_E4M3 = 2
    FA3_F32 = 3


class Fa3Tensor(ctypes.Structure):
    """fa3_tensor: logical shape (batch, seqlen, heads, head_dim), strides in elements.

    ``data`` is a device pointer; head_dim is contiguous, so it has no stride field.
    """

    _fields_ = [
        ("data", c_void_p),
        ("dtype", c_int),  # a C enum is an int on every ABI we target (x86-64, aarch64)
        ("batch", c_int64),
        ("seqlen", c_int64),
        ("heads", c_int64),
        ("head_dim", c_int64),
        ("stride_batch", c_int64),
        ("stride_seq", c_int64),
        ("stride_head", c_int64),
    ]


class Fa3Params(ctypes.Structure):
    """fa3_params: softmax_scale (0 means 1/sqrt(head_dim)), causal (0 or 1) and
    deterministic (0 or 1: the backward's fixed reduction order; the forward ignores it).

    ``deterministic`` was appended after the first release (the header keeps the struct's
    prefix, so the forward of an older library reads the first two fields unchanged); every
    instance built here sets it, 0 unless asked.
    """

    _fields_ = [
        ("softmax_scale", c_float),
        ("causal", c_int),
        ("deterministic", c_int),
    ]


# Device pointers (tensor data, lse, the stream) are declared as c_void_p: they are plain
# integers from PyTorch (data_ptr(), cuda_stream) and must never be dereferenced here.
# fa3_handle* is opaque, so it is a c_void_p too.
_TensorPtr = POINTER(Fa3Tensor)
_ParamsPtr = POINTER(Fa3Params)

# name -> (restype, argtypes), in the header's order.
_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "fa3_create": (c_int, [POINTER(c_void_p), c_int, c_char_p]),
    "fa3_destroy": (c_int, [c_void_p]),
    "fa3_forward": (
        c_int,
        [c_void_p, _TensorPtr, _TensorPtr, _TensorPtr, _TensorPtr, c_void_p, _ParamsPtr, c_void_p],
    ),
    # q, k, v, o, dout are const fa3_tensor* in C and dq, dk, dv are not; ctypes passes both
    # as the same pointer type. lse is a device pointer (c_void_p), as the forward's.
    "fa3_backward": (
        c_int,
        [c_void_p, _TensorPtr, _TensorPtr, _TensorPtr, _TensorPtr, _TensorPtr, c_void_p,
         _TensorPtr, _TensorPtr, _TensorPtr, _ParamsPtr, c_void_p, c_size_t, c_void_p],
    ),
    "fa3_backward_with_kernel": (
        c_int,
        [c_void_p, c_char_p, _TensorPtr, _TensorPtr, _TensorPtr, _TensorPtr, _TensorPtr,
         c_void_p, _TensorPtr, _TensorPtr, _TensorPtr, _ParamsPtr, c_void_p, c_size_t,
         c_void_p],
    ),
    "fa3_backward_workspace_size": (
        c_int,
        [c_void_p, _TensorPtr, _TensorPtr, _ParamsPtr, POINTER(c_size_t)],
    ),
    "fa3_status_string": (c_char_p, [c_int]),
    "fa3_last_error": (c_char_p, []),
    "fa3_kernel_count": (c_int, []),
    "fa3_kernel_name": (c_char_p, [c_int]),
    "fa3_kernel_cubin": (c_int, [c_char_p, POINTER(c_void_p), POINTER(c_size_t)]),
    "fa3_tuning_table_validate": (c_int, [c_char_p]),
    "fa3_forward_select": (
        c_int,
        [c_void_p, _TensorPtr, _TensorPtr, _TensorPtr, _ParamsPtr, POINTER(c_char_p)],
    ),
    "fa3_forward_with_kernel": (
        c_int,
        [c_void_p, c_char_p, _TensorPtr, _TensorPtr, _TensorPtr, _TensorPtr, c_void_p,
         _ParamsPtr, c_void_p],
    ),
}


class Library:
    """A loaded libfa3 with every C API function declared (argtypes and restype).

    Functions are attributes named as in C (``lib.fa3_forward(...)``). A function the
    loaded library does not export (an older build) raises MissingFunctionError when it is
    used, so the rest of the API keeps working.
    """

    def __init__(self, cdll: ctypes.CDLL, path: str) -> None:
        self.cdll = cdll
        self.path = path
        self.missing: list[str] = []
        for name, (restype, argtypes) in _SIGNATURES.items():
            try:
                function = getattr(cdll, name)
            except AttributeError:
                self.missing.append(name)
                continue
            function.restype = restype
            function.argtypes = argtypes
            setattr(self, name, function)

    def __getattr__(self, name: str) -> Callable[..., object]:
        # Only reached for names __init__ did not set: the missing ones, or typos.
        if name in _SIGNATURES:
            raise MissingFunctionError(
                f"{self.path} does not export {name}(); it was built from an older fa3 "
                f"than this Python package - rebuild it (make) or point {LIBRARY_ENV_VAR} "
                f"at a current build"
            )
        raise AttributeError(name)

    def last_error(self) -> str:
        """fa3_last_error() of the calling thread, decoded."""
        raw = self.fa3_last_error()
        return raw.decode("utf-8", "replace") if raw else ""

    def status_string(self, status: int) -> str:
        """fa3_status_string(status), decoded."""
        raw = self.fa3_status_string(status)
        return raw.decode("utf-8", "replace") if raw else ""


# ---- locating and loading -------------------------------------------------------------


def library_candidates(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The paths or loader names tried, in order (see the module docstring)."""
    explicit = environ.get(LIBRARY_ENV_VAR)
    if explicit:
        return [explicit]
    candidates = [
        str(_PACKAGE_DIR / LIBRARY_FILE_NAME),
        str(_PACKAGE_DIR.parent.parent / "build" / LIBRARY_FILE_NAME),
        LIBRARY_FILE_NAME,
    ]
    return candidates


def _is_path(candidate: str) -> bool:
    return os.sep in candidate


def _try_load(candidate: str) -> tuple[Optional[ctypes.CDLL], str]:
    """dlopen one candidate: (the library, "") or (None, why it failed)."""
    if _is_path(candidate) and not os.path.exists(candidate):
        return None, "no such file"
    try:
        return ctypes.CDLL(candidate), ""
    except OSError as error:
        return None, str(error)


def _loaded_path(cdll: ctypes.CDLL, candidate: str) -> str:
    """The file a loaded candidate came from (a loader name is resolved through the
    process's memory map, Linux only; otherwise the name is returned as given)."""
    if _is_path(candidate):
        return os.path.realpath(candidate)
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.split()
                if len(fields) >= 6 and os.path.basename(fields[5]).startswith("libfa3"):
                    return fields[5]
    except OSError:
        pass
    return candidate


def load_library(environ: Mapping[str, str] = os.environ) -> Library:
    """Locates and loads libfa3 now (no caching; get_library() caches).

    Raises LibraryNotFoundError listing every candidate and why it failed.
    """
    failures: list[str] = []
    candidates = library_candidates(environ)
    for candidate in candidates:
        cdll, why = _try_load(candidate)
        if cdll is not None:
            return Library(cdll, _loaded_path(cdll, candidate))
        failures.append(f"{candidate}: {why}")
    if not environ.get(LIBRARY_ENV_VAR):
        # find_library runs ldconfig/gcc subprocesses, so it is the last resort.
        found = ctypes.util.find_library("fa3")
        if found:
            cdll, why = _try_load(found)
            if cdll is not None:
                return Library(cdll, _loaded_path(cdll, found))
            failures.append(f"{found} (ctypes.util.find_library): {why}")
        else:
            failures.append("ctypes.util.find_library('fa3'): not found")
    raise LibraryNotFoundError(_not_found_message(environ, failures))


def open_library(path: "os.PathLike[str] | str") -> Library:
    """Loads the libfa3 file at ``path``, whatever ``$FA3_LIBRARY`` and the default search
    would pick. Another file than the default library gets its own dlopen handle, so two
    builds (this one and a previous one) run side by side in one process; libfa3 exports
    only its C API (src/libfa3.map), so neither binds to the other's internals. The same
    file as the default library yields the same loaded library.

    Raises LibraryNotFoundError naming the path and why it could not be loaded.
    """
    # An absolute path: a bare name would go to the loader's search and could find the
    # default library instead of the file asked for.
    return load_library({LIBRARY_ENV_VAR: os.path.abspath(os.fspath(path))})


def _not_found_message(environ: Mapping[str, str], failures: list[str]) -> str:
    tried = "; ".join(failures)
    if environ.get(LIBRARY_ENV_VAR):
        return (f"cannot load libfa3 from {LIBRARY_ENV_VAR}={environ[LIBRARY_ENV_VAR]} "
                f"({tried})")
    return (f"cannot find libfa3.so: build it with `make` in the fa3 source tree, or set "
            f"{LIBRARY_ENV_VAR} to its path (tried: {tried})")


_library: Optional[Library] = None
_library_lock = threading.Lock()


def get_library() -> Library:
    """The process-wide libfa3, loaded on first use."""
    global _library
    if _library is None:
        with _library_lock:
            if _library is None:
                _library = load_library()
    return _library


def with_python_names(detail: str, python_names: Mapping[str, str]) -> str:
    """The C sentence, with a note for each tensor it names by its C name where the Python
    argument has another ({"o": "out"}: "o overlaps q ..." gets "(o is the out argument)")."""
    notes = [f"{c_name} is the {py_name} argument" for c_name, py_name in python_names.items()
             if re.search(rf"(?<![\w>.-]){re.escape(c_name)}(?=->|[\s,;:)]|$)", detail)]
    return f"{detail} ({'; '.join(notes)})" if notes else detail


def raise_for_status(lib: Library, status: int, function: str,
                     python_names: Optional[Mapping[str, str]] = None) -> None:
    """Raises Fa3Error for a failed call; must run right after it, on the same thread,
    because fa3_last_error() is thread-local and overwritten by the next failure.
    python_names: the C names of tensors whose Python argument is named otherwise."""
    if status == Status.FA3_OK:
        return
    try:
        known: int = Status(status)
        name = Status(status).name
    except ValueError:  # a status newer than this package
        known, name = status, f"fa3_status({status})"
    detail = lib.last_error() or lib.status_string(status)
    if python_names:
        detail = with_python_names(detail, python_names)
    raise Fa3Error(known, name, detail, function)
