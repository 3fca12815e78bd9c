"""fa3 handles: one per (device, tuning table), created lazily and cached per device (and
per loaded library, when a second libfa3 is opened with fa3.open_library).

A handle holds the loaded kernels of one device and its tuning table; creating one loads
modules into a CUDA context, so the binding keeps one per device for the process and
destroys them at exit. The C library documents handles as safe to use from several
threads at once, so the cache hands the same handle to every thread.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import threading
import weakref
from typing import TYPE_CHECKING, Iterator, Optional, Union

from ._lib import Library, get_library, raise_for_status

if TYPE_CHECKING:
    from .api import Binding

PathLike = Union[str, "os.PathLike[str]"]


def _destroy(lib: Library, pointer: int) -> None:
    # Errors are ignored: this runs from close(), a finalizer or at interpreter exit, where
    # the CUDA driver may already be shutting down and nobody could act on the error.
    lib.fa3_destroy(pointer)


class Handle:
    """An fa3_handle for one CUDA device (an ordinal as the driver counts them, which is
    what PyTorch's device index is) and one tuning table.

    Most code never needs this class: fa3.forward() uses a cached handle per device, with the
    built-in tuning table. Make one to run with a tuning table of your own (fa3-tune writes
    one for the present GPU): pass it as ``handle=`` to fa3.forward, select_kernel, backward,
    backward_workspace_size and attention (or to a Binding's, for a handle of that Binding's
    library), or to ctypes calls of your own; or to check that a device can be used at all.
    Close it (or leave the with-block) only once the work launched with it has finished,
    and keep it open (referenced) while a CUDA graph that captured a call with it may be
    replayed: the graph holds its kernels and tile counters.
    ``fa3_create`` uses the calling thread's current CUDA context when it belongs to the
    device, otherwise the device's primary context (the one PyTorch uses).

    ``library`` is the loaded libfa3 the handle belongs to: a ``Binding`` (what
    fa3.open_library returns) or its ``.library`` (default: the package's own); a handle
    must only be passed to the functions of the library that created it.

    Raises Fa3Error (e.g. FA3_ERR_NO_DRIVER, FA3_ERR_ARCH, FA3_ERR_TUNING_TABLE).
    """

    def __init__(self, device: int = 0, tuning_table: Optional[PathLike] = None,
                 library: Optional[Union[Library, "Binding"]] = None) -> None:
        if library is not None and not isinstance(library, Library):
            library = library.library  # a Binding (fa3.open_library)
        lib = library if library is not None else get_library()
        pointer = ctypes.c_void_p()
        table = None if tuning_table is None else os.fsencode(tuning_table)
        raise_for_status(lib, lib.fa3_create(ctypes.byref(pointer), int(device), table),
                         "fa3_create")
        self.device = int(device)
        self.tuning_table = None if tuning_table is None else os.fspath(tuning_table)
        self._lib = lib
        self._pointer: Optional[int] = pointer.value
        # The C calls running with this handle on any thread (_in_use): close() waits for
        # them, so that it never destroys the handle under a call.
        self._calls = 0
        self._calls_done = threading.Condition()
        # Destroys the handle if it is garbage-collected (or still alive at exit) without
        # close(); close() runs the same finalizer, so it is destroyed exactly once.
        self._finalizer = weakref.finalize(self, _destroy, lib, pointer.value)

    @property
    def _as_parameter_(self) -> int:
        """Lets a Handle be passed directly as the fa3_handle* argument of a ctypes call."""
        if self._pointer is None:
            raise ValueError("this fa3 Handle has been closed")
        return self._pointer

    @property
    def closed(self) -> bool:
        return self._pointer is None

    @contextlib.contextmanager
    def _in_use(self) -> Iterator[int]:
        """The C pointer, for the C calls made inside the with-block; the handle is not
        destroyed before the block ends (close() on another thread waits for it). Raises
        ValueError if the handle has been closed."""
        with self._calls_done:
            if self._pointer is None:
                raise ValueError(f"handle {self!r} has been closed; pass an open one")
            self._calls += 1
            pointer = self._pointer
        try:
            yield pointer
        finally:
            with self._calls_done:
                self._calls -= 1
                self._calls_done.notify_all()

    def close(self) -> None:
        """fa3_destroy now; idempotent. A call of this package running with the handle on
        another thread finishes first (calls made after close() raise ValueError); GPU work
        already launched with it must have finished too, which close() does not wait for."""
        with self._calls_done:
            self._pointer = None
            while self._calls:
                self._calls_done.wait()
        self._finalizer()

    # A copy would share the C handle and its finalizer: closing (or collecting) one would
    # destroy the handle the other still passes to C. So a copy is the handle itself (a
    # deep-copied model keeps using it), and pickling, which cannot carry a CUDA context's
    # loaded kernels to another process, is refused.
    def __copy__(self) -> "Handle":
        return self

    def __deepcopy__(self, memo: dict) -> "Handle":
        return self

    def __reduce__(self) -> object:
        raise TypeError("an fa3.Handle cannot be pickled: it holds kernels loaded into this "
                        "process's CUDA context; create a Handle in the other process")

    def __enter__(self) -> "Handle":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        table = f", tuning_table={self.tuning_table!r}" if self.tuning_table else ""
        return f"fa3.Handle(device={self.device}{table}) [{state}]"


# Keyed by (the library's dlopen handle, device): each loaded libfa3 has its own handles (a
# handle of one build must never reach the other's fa3_forward). The dlopen handle, not the
# path: a library the loader found has its path read from /proc/self/maps, which cannot tell
# two loaded libfa3 files apart by name alone; dlopen gives one handle per file.
_handles: dict[tuple[int, int], Handle] = {}
_handles_lock = threading.Lock()
_atexit_registered = False


def handle_for_device(device: int, library: Optional[Library] = None) -> Handle:
    """The process-wide handle of a device (built-in tuning table) in ``library`` (default:
    the package's own libfa3), created on first use.

    The caller makes the device's primary context current first (PyTorch's
    ``torch.cuda.device``), so the handle's modules load into the context PyTorch uses.
    """
    global _atexit_registered
    lib = library if library is not None else get_library()
    key = (lib.cdll._handle, device)
    handle = _handles.get(key)
    if handle is not None:
        return handle
    with _handles_lock:
        handle = _handles.get(key)
        if handle is None:
            handle = Handle(device, library=lib)
            _handles[key] = handle
            if not _atexit_registered:
                # Registered after torch was imported and initialized CUDA, so it runs before
                # torch's own exit hooks (atexit is last-in, first-out).
                atexit.register(close_cached_handles)
                _atexit_registered = True
    return handle


def close_cached_handles() -> None:
    """Destroys every cached handle, of every loaded library (runs at exit; safe to call any
    time no fa3 work is in flight and no CUDA graph that captured an fa3 call with a cached
    handle will be replayed - such a graph holds the handle's kernels and tile counters; the
    next call creates fresh handles)."""
    with _handles_lock:
        handles = list(_handles.values())
        _handles.clear()
    for handle in handles:
        handle.close()
