"""The exceptions of the fa3 package.

- Fa3Error: the C library refused or failed a call. It carries the status (as the C enum
  names it) and the library's own sentence from fa3_last_error(), which names the argument
  and the rule it broke.
- LibraryNotFoundError: libfa3.so could not be located or loaded.
- MissingFunctionError: the loaded libfa3.so is older than this package.

Argument errors that only Python can see (not a tensor, tensors on different devices, not
4-D) are plain TypeError / ValueError raised before the library is called.
"""

from __future__ import annotations

from typing import Optional


class Fa3Error(RuntimeError):
    """A failed fa3 C API call.

    Attributes:
        status: the fa3_status value (an fa3.Status member when the value is known).
        status_name: its C name, e.g. "FA3_ERR_UNSUPPORTED".
        detail: fa3_last_error()'s sentence (may be empty for a library that set none).
        function: the C function that failed, e.g. "fa3_forward".
    """

    def __init__(self, status: int, status_name: str, detail: str,
                 function: Optional[str] = None) -> None:
        self.status = status
        self.status_name = status_name
        self.detail = detail
        self.function = function
        where = f"{function}: " if function else ""
        super().__init__(f"{where}{status_name}: {detail}" if detail else f"{where}{status_name}")

    def __reduce__(self) -> tuple:
        # args holds the message alone: pickling (multiprocessing, process pools) needs the
        # constructor's own arguments back.
        return (type(self), (self.status, self.status_name, self.detail, self.function))


class LibraryNotFoundError(OSError):
    """libfa3.so was not found or could not be loaded; the message lists what was tried."""


class MissingFunctionError(NotImplementedError):
    """The loaded libfa3.so does not export a function this package needs."""
