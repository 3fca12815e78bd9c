"""Tests that run everywhere: no PyTorch, no GPU, no driver needed (only libfa3.so for most).

They cover finding and loading the library, the ctypes mirror of the C header, the kernel
list, tuning-table validation, and Fa3Error carrying the library's sentence.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import pickle
import re
import shutil
import threading
import weakref
from pathlib import Path
from typing import Any, Optional

import pytest

import fa3
from fa3 import _lib

REPO_DIR = Path(__file__).resolve().parents[2]

HEADER = REPO_DIR / "include" / "fa3" / "fa3.h"
BUILT_IN_TABLE = REPO_DIR / "src" / "runtime" / "tuning_table.json"
# The shape of a kernel name only: the grammar itself (which tokens, in which order) lives in
# src/kernels/fwd_names.h and bwd_config.h (the backward's: fa3_bwd_...), and
# test/test_registry.cpp holds the library to it.
KERNEL_NAME = re.compile(r"^fa3_(fwd|bwd)_(f16|bf16)_d\d+_m\d+_n\d+_s\d+_w\d+(_[a-z0-9]+)*$")


# ---- finding the library --------------------------------------------------------------


def test_library_loads_from_a_file_that_exists(library: str) -> None:
    assert Path(library).is_file(), library
    assert fa3.library_path() == library


def test_fa3_library_variable_pointing_nowhere_names_it(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "libfa3.so"
    with pytest.raises(fa3.LibraryNotFoundError, match="FA3_LIBRARY") as raised:
        _lib.load_library({"FA3_LIBRARY": str(missing)})
    assert str(missing) in str(raised.value)


def test_fa3_library_variable_pointing_at_a_non_library_says_why(tmp_path: Path) -> None:
    not_a_library = tmp_path / "libfa3.so"
    not_a_library.write_text("not an ELF file")
    with pytest.raises(fa3.LibraryNotFoundError) as raised:
        _lib.load_library({"FA3_LIBRARY": str(not_a_library)})
    assert str(not_a_library) in str(raised.value)


def test_fa3_library_variable_takes_precedence() -> None:
    assert _lib.library_candidates({"FA3_LIBRARY": "/x/libfa3.so"}) == ["/x/libfa3.so"]


def test_default_search_looks_next_to_the_package_then_in_build() -> None:
    candidates = _lib.library_candidates({})
    package_dir = Path(fa3.__file__).resolve().parent
    assert candidates[0] == str(package_dir / "libfa3.so")
    assert candidates[1] == str(package_dir.parent.parent / "build" / "libfa3.so")
    assert "libfa3.so" in candidates[2:]


def test_import_does_not_need_torch() -> None:
    # fa3 must import where PyTorch is absent; it may only import torch inside calls.
    source = Path(fa3.__file__).resolve().parent
    for module in source.glob("*.py"):
        top_level_imports = [line for line in module.read_text().splitlines()
                             if re.match(r"^(import|from)\s+torch\b", line)]
        assert not top_level_imports, f"{module.name} imports torch at module level"


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None,
                    reason="PyTorch is installed here")
def test_forward_without_torch_says_torch_is_needed() -> None:
    with pytest.raises(ImportError, match="torch"):
        fa3.forward(None, None, None)  # type: ignore[arg-type]


# ---- the ctypes mirror of include/fa3/fa3.h ---------------------------------------------


def _header_text() -> str:
    if not HEADER.is_file():
        pytest.skip(f"{HEADER} not found (package used outside the source tree)")
    return re.sub(r"/\*.*?\*/", "", HEADER.read_text(), flags=re.S)


def _enum_members(header: str, enum_name: str) -> list[str]:
    body = re.search(r"typedef enum\s*\{([^}]*)\}\s*" + enum_name + r"\s*;", header)
    assert body, f"{enum_name} not found in {HEADER}"
    members = [m.split("=")[0].strip() for m in body.group(1).split(",")]
    return [m for m in members if m]


def _struct_declarations(header: str, struct_name: str) -> list[tuple[str, str]]:
    """(C type, field name) of each field of a typedef'd struct, in order: "int64_t batch,
    seqlen" gives ("int64_t", "batch"), ("int64_t", "seqlen"); "void* data" ("void*", "data")."""
    body = re.search(r"typedef struct\s*\{([^}]*)\}\s*" + struct_name + r"\s*;", header)
    assert body, f"{struct_name} not found in {HEADER}"
    text = re.sub(r"/\*.*?\*/", " ", body.group(1), flags=re.S)
    fields = []
    for declaration in text.split(";"):
        declaration = declaration.strip()
        if not declaration:
            continue
        first, *others = declaration.split(",")
        c_type, name = re.match(r"(.*?)(\w+)\s*$", first).groups()
        c_type = c_type.replace(" ", "")
        fields.append((c_type, name))
        fields += [(c_type, other.strip()) for other in others]
    return fields


def _struct_fields(header: str, struct_name: str) -> list[str]:
    return [name for _, name in _struct_declarations(header, struct_name)]


# The ctypes type each C type of the header's structs is mirrored by (a C enum is an int on
# every ABI fa3 targets).
CTYPE_OF = {"void*": ctypes.c_void_p, "fa3_dtype": ctypes.c_int, "int64_t": ctypes.c_int64,
            "float": ctypes.c_float, "int": ctypes.c_int}


def test_struct_field_types_match_the_header() -> None:
    """Each field's ctypes type is the C type's (so each offset is too): a change of a type
    that kept the struct's size would otherwise pass the name and size checks."""
    for struct_name, mirror in (("fa3_tensor", fa3.Fa3Tensor), ("fa3_params", fa3.Fa3Params)):
        declared = _struct_declarations(_header_text(), struct_name)
        assert [CTYPE_OF[c_type] for c_type, _ in declared] == [t for _, t in mirror._fields_], (
            struct_name)


def test_status_enum_matches_the_header() -> None:
    members = _enum_members(_header_text(), "fa3_status")
    assert [s.name for s in fa3.Status] == members
    assert [int(s) for s in fa3.Status] == list(range(len(members)))


def test_dtype_enum_matches_the_header() -> None:
    members = _enum_members(_header_text(), "fa3_dtype")
    assert [d.name for d in fa3.DType] == members
    assert [int(d) for d in fa3.DType] == list(range(len(members)))


def test_tensor_struct_matches_the_header() -> None:
    fields = _struct_fields(_header_text(), "fa3_tensor")
    assert [name for name, _ in fa3.Fa3Tensor._fields_] == fields
    # void* + enum (+4 padding) + 7 int64
    assert ctypes.sizeof(fa3.Fa3Tensor) == 72


def test_params_struct_matches_the_header() -> None:
    fields = _struct_fields(_header_text(), "fa3_params")
    assert [name for name, _ in fa3.Fa3Params._fields_] == fields
    # float + int + int (deterministic, appended after the first release)
    assert ctypes.sizeof(fa3.Fa3Params) == 12
    # The first release's prefix is unchanged, so an older library's forward reads it as before.
    assert fa3.Fa3Params.softmax_scale.offset == 0 and fa3.Fa3Params.causal.offset == 4


def test_every_place_that_builds_params_sets_every_field() -> None:
    from fa3 import api
    params = api._params(True, 0.5, True)
    assert (params.softmax_scale, params.causal, params.deterministic) == (0.5, 1, 1)
    default = api._params(False, None)
    assert (default.softmax_scale, default.causal, default.deterministic) == (0.0, 0, 0)
    # A scale float32 rounds to 0 would be the C API's "default": refused, as 0 is.
    for tiny in (0.0, 1e-46, -1e-46):
        with pytest.raises(ValueError, match="softmax_scale"):
            api._params(False, tiny)
    assert api._params(False, 1e-44).softmax_scale > 0  # a float32 subnormal: a real scale
    # A finite scale past float32's range would reach C as inf: refused here, by name.
    for huge in (1e39, -1e39, 10**400):
        with pytest.raises(ValueError, match="softmax_scale"):
            api._params(False, huge)
    assert api._params(False, 3.0e38).softmax_scale == pytest.approx(3.0e38)
    # Fa3Params is built in api._params only (one place to keep in step with the header).
    source = Path(api.__file__).read_text()
    assert source.count("Fa3Params(") == 1, "build fa3_params through api._params"


def test_every_header_function_is_declared() -> None:
    declared = re.findall(r"\b(fa3_\w+)\s*\(", _header_text())
    assert set(declared) <= set(_lib._SIGNATURES), set(declared) - set(_lib._SIGNATURES)


# The ctypes type of each C parameter and return type of the header's functions: pointers to
# opaque or device memory are c_void_p, strings c_char_p, out-parameters POINTER(...).
CTYPE_OF_PARAMETER = {
    "fa3_handle**": ctypes.POINTER(ctypes.c_void_p), "fa3_handle*": ctypes.c_void_p,
    "fa3_tensor*": _lib._TensorPtr, "fa3_params*": _lib._ParamsPtr, "float*": ctypes.c_void_p,
    "void*": ctypes.c_void_p, "void**": ctypes.POINTER(ctypes.c_void_p),
    "char*": ctypes.c_char_p, "char**": ctypes.POINTER(ctypes.c_char_p), "int": ctypes.c_int,
    "size_t": ctypes.c_size_t, "size_t*": ctypes.POINTER(ctypes.c_size_t),
    "fa3_status": ctypes.c_int,
}


def _prototypes(header: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (return type, parameter types), const dropped, for every fa3_* function."""
    text = re.sub(r"/\*.*?\*/", " ", header, flags=re.S)
    result = {}
    for match in re.finditer(r"^([\w ]+?\**)\s*(fa3_\w+)\(([^)]*)\);", text, flags=re.M):
        returns, name, parameters = match.groups()

        def c_type(declaration: str) -> str:
            declaration = declaration.replace("const", " ").strip()
            stars = declaration.count("*")
            return declaration.replace("*", " ").split()[0] + "*" * stars

        types = [] if parameters.strip() == "void" else [
            c_type(re.sub(r"\w+\s*$", "", p.strip())) for p in parameters.split(",")]
        result[name] = (c_type(returns), types)
    return result


def test_every_signature_follows_the_header() -> None:
    """Each function's restype and argtypes are its prototype's, parameter by parameter."""
    prototypes = _prototypes(_header_text())
    assert set(prototypes) == set(re.findall(r"\b(fa3_\w+)\s*\(", _header_text()))
    for name, (returns, parameters) in prototypes.items():
        restype, argtypes = _lib._SIGNATURES[name]
        assert CTYPE_OF_PARAMETER[returns] == restype, name
        assert [CTYPE_OF_PARAMETER[p] for p in parameters] == argtypes, name


def test_the_backward_signatures_follow_the_header() -> None:
    backward_args = _lib._SIGNATURES["fa3_backward"][1]
    # h, q, k, v, o, dout, lse, dq, dk, dv, p, workspace, workspace_bytes, stream
    assert len(backward_args) == 14
    assert backward_args[6] is ctypes.c_void_p and backward_args[11] is ctypes.c_void_p
    assert backward_args[12] is ctypes.c_size_t and backward_args[13] is ctypes.c_void_p
    size_args = _lib._SIGNATURES["fa3_backward_workspace_size"][1]
    assert len(size_args) == 5 and size_args[4] == ctypes.POINTER(ctypes.c_size_t)


def test_a_bindings_functions_take_what_the_packages_take() -> None:
    """fa3.open_library(...)'s Binding mirrors the package's functions, keyword for keyword
    and default for default (handle= included), so code can switch libraries by name."""
    import inspect
    for name in ("forward", "select_kernel", "backward", "backward_workspace_size",
                 "attention", "kernels", "kernel_cubin", "validate_tuning_table",
                 "library_path"):
        package = inspect.signature(getattr(fa3, name))
        method = inspect.signature(getattr(fa3.Binding, name))
        parameters = list(method.parameters.values())
        assert parameters[0].name == "self", name
        assert [(p.name, p.default, p.kind) for p in parameters[1:]] == [
            (p.name, p.default, p.kind) for p in package.parameters.values()], name
    for name in ("forward", "select_kernel", "backward", "backward_workspace_size",
                 "attention"):
        assert inspect.signature(getattr(fa3, name)).parameters["handle"].default is None, name


# The backward pass (issue 28) is being written into the library; a build from before it
# lacks these functions (fa3_backward_with_kernel came later still, for fa3-tune), and the
# package must keep working without them.
BACKWARD_FUNCTIONS = {"fa3_backward", "fa3_backward_workspace_size", "fa3_backward_with_kernel"}


def test_every_forward_function_is_exported_by_the_library(library: str) -> None:
    missing = set(fa3._lib.get_library().missing) - BACKWARD_FUNCTIONS
    assert not missing, f"{library} lacks these functions: {sorted(missing)}"


def test_the_backward_functions_are_exported_by_the_library(library: str) -> None:
    missing = set(fa3._lib.get_library().missing) & BACKWARD_FUNCTIONS
    assert not missing, (f"{library} lacks backward functions {sorted(missing)} (a build from "
                         f"before the backward pass?): rebuild it")


# ---- a library without the backward (MissingFunctionError, no library or torch needed) -----


class _StubFunction:
    """Stands for a ctypes function: takes argtypes/restype, must never be called here."""

    def __call__(self, *arguments: Any) -> int:
        raise AssertionError("a stub library function was called")


class _LibraryWithoutBackward:
    """A stand-in for a CDLL of a libfa3 built before the backward pass: it has every
    declared function but the backward's."""

    def __init__(self) -> None:
        for name in _lib._SIGNATURES:
            if name not in BACKWARD_FUNCTIONS:
                setattr(self, name, _StubFunction())


def _old_library() -> Any:
    return _lib.Library(_LibraryWithoutBackward(), "/old/build/libfa3.so")  # type: ignore[arg-type]


def test_a_library_without_the_backward_lists_what_it_lacks() -> None:
    old = _old_library()
    assert sorted(old.missing) == sorted(BACKWARD_FUNCTIONS)
    with pytest.raises(fa3.MissingFunctionError, match="does not export fa3_backward\\(\\)") as raised:
        old.fa3_backward
    assert "/old/build/libfa3.so" in str(raised.value)
    assert "rebuild" in str(raised.value)


@pytest.mark.parametrize("method", ["backward", "attention", "backward_workspace_size"])
def test_the_backward_of_a_library_without_it_fails_first_and_clearly(method: str) -> None:
    """Binding.backward/attention/backward_workspace_size ask the library for the backward's
    functions before anything else: no torch, no tensors, no GPU are needed to hear why."""
    binding = fa3.Binding(_old_library())
    arguments = {"backward": (None,) * 6, "attention": (None,) * 3,
                 "backward_workspace_size": (None,) * 2}[method]
    with pytest.raises(fa3.MissingFunctionError, match="fa3_backward") as raised:
        getattr(binding, method)(*arguments)
    assert "/old/build/libfa3.so" in str(raised.value)
    # The forward's functions of that library are still there.
    assert callable(binding.library.fa3_kernel_count)


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None,
                    reason="PyTorch is installed here")
def test_backward_without_torch_says_torch_is_needed() -> None:
    with pytest.raises(ImportError, match="torch"):
        fa3.backward(None, None, None, None, None, None)  # type: ignore[arg-type]
    with pytest.raises(ImportError, match="torch"):
        fa3.attention(None, None, None)  # type: ignore[arg-type]


# ---- kernels --------------------------------------------------------------------------


def test_kernels_lists_names_that_encode_their_config(library: str) -> None:
    names = fa3.kernels()
    assert isinstance(names, list)
    assert len(names) == len(set(names)), "a kernel is listed twice"
    for name in names:
        assert KERNEL_NAME.match(name), name


def test_kernel_cubin_is_an_elf_file(library: str) -> None:
    names = fa3.kernels()
    if not names:
        pytest.skip(f"{library} has no compiled kernels")
    assert fa3.kernel_cubin(names[0])[:4] == b"\x7fELF"


def test_kernel_cubin_of_an_unknown_kernel_raises(library: str) -> None:
    with pytest.raises(fa3.Fa3Error) as raised:
        fa3.kernel_cubin("fa3_fwd_bf16_d128_m128_n128_s2_w2_not_a_kernel")
    assert raised.value.detail


# ---- tuning tables --------------------------------------------------------------------


def _good_table(library: str) -> dict[str, Any]:
    """The source tree's built-in table, when this library has the kernels it names."""
    if not BUILT_IN_TABLE.is_file():
        pytest.skip(f"{BUILT_IN_TABLE} not found")
    if not fa3.kernels():
        pytest.skip(f"{library} has no compiled kernels, so no table can name one")
    return json.loads(BUILT_IN_TABLE.read_text())


def _first_kernel_field(node: Any) -> Optional[dict[str, Any]]:
    """The first JSON object with a "kernel" string (an entry), searched depth-first."""
    if isinstance(node, dict):
        if isinstance(node.get("kernel"), str):
            return node
        children = list(node.values())
    elif isinstance(node, list):
        children = node
    else:
        return None
    for child in children:
        found = _first_kernel_field(child)
        if found is not None:
            return found
    return None


def _expect_table_error(path: Path) -> fa3.Fa3Error:
    with pytest.raises(fa3.Fa3Error) as raised:
        fa3.validate_tuning_table(path)
    error = raised.value
    assert error.status == fa3.Status.FA3_ERR_TUNING_TABLE, str(error)
    assert error.status_name == "FA3_ERR_TUNING_TABLE"
    assert path.name in error.detail, f"the sentence should name the file: {error.detail}"
    return error


def test_the_built_in_table_validates(library: str, tmp_path: Path) -> None:
    table = _good_table(library)
    copy = tmp_path / "good table.json"  # a space: the path must reach C unchanged
    copy.write_text(json.dumps(table))
    assert fa3.validate_tuning_table(copy) is None
    assert fa3.validate_tuning_table(str(copy)) is None


def test_a_file_that_is_not_json_is_rejected(library: str, tmp_path: Path) -> None:
    bad = tmp_path / "not_json.json"
    bad.write_text('{"version": 1, "entries": [')
    _expect_table_error(bad)


def test_a_missing_file_is_rejected(library: str, tmp_path: Path) -> None:
    _expect_table_error(tmp_path / "missing.json")


def test_an_unknown_top_level_key_is_rejected(library: str, tmp_path: Path) -> None:
    table = _good_table(library)
    table["bogus_key"] = 1
    bad = tmp_path / "unknown_key.json"
    bad.write_text(json.dumps(table))
    _expect_table_error(bad)


def test_a_kernel_not_compiled_in_is_rejected(library: str, tmp_path: Path) -> None:
    table = _good_table(library)
    entry = _first_kernel_field(table)
    if entry is None:
        pytest.skip("the built-in table has no \"kernel\" field to change")
    entry["kernel"] = "fa3_fwd_bf16_d128_m128_n128_s2_w2_nonexistent"
    bad = tmp_path / "unknown_kernel.json"
    bad.write_text(json.dumps(table))
    error = _expect_table_error(bad)
    assert "nonexistent" in error.detail


# ---- errors ---------------------------------------------------------------------------


def _driver_present() -> bool:
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


@pytest.mark.skipif(_driver_present(), reason="a CUDA driver is present on this machine")
def test_creating_a_handle_without_a_driver_raises_no_driver(library: str) -> None:
    if not fa3.kernels():
        pytest.skip(f"{library} has no kernels, so fa3_create rejects its built-in tuning "
                    f"table before it looks for a driver")
    with pytest.raises(fa3.Fa3Error) as raised:
        fa3.Handle(0)
    error = raised.value
    assert isinstance(error, RuntimeError)
    assert error.status == fa3.Status.FA3_ERR_NO_DRIVER
    assert error.status_name == "FA3_ERR_NO_DRIVER"
    assert error.function == "fa3_create"
    assert error.detail, "fa3_last_error() should explain the failure"
    assert "FA3_ERR_NO_DRIVER" in str(error) and error.detail in str(error)


def stand_in_handle(destroyed: list) -> "fa3.Handle":
    """A Handle without a driver: its C handle a stand-in pointer, 0xdead, whose fa3_destroy
    appends it to ``destroyed``."""
    from fa3.handle import Handle
    handle = Handle.__new__(Handle)
    handle.device, handle.tuning_table, handle._pointer = 0, None, 0xdead
    handle._calls, handle._calls_done = 0, threading.Condition()
    handle._finalizer = weakref.finalize(handle, destroyed.append, 0xdead)
    return handle


def test_close_waits_for_the_calls_running_with_the_handle() -> None:
    """close() on one thread while another is inside a call with the handle: the handle is
    destroyed once the call is done, never under it, and later calls are refused."""
    destroyed = []
    handle = stand_in_handle(destroyed)
    inside, leave = threading.Event(), threading.Event()
    seen = []

    def call() -> None:
        with handle._in_use() as pointer:
            seen.append(pointer)
            inside.set()
            leave.wait(10)
            seen.append(list(destroyed))  # what a C call here would find

    caller = threading.Thread(target=call)
    caller.start()
    assert inside.wait(10)
    closer = threading.Thread(target=handle.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive() and destroyed == [], "close() destroyed the handle under a call"
    leave.set()
    caller.join(10)
    closer.join(10)
    assert not closer.is_alive() and seen == [0xdead, []] and destroyed == [0xdead]
    with pytest.raises(ValueError, match="has been closed"):
        with handle._in_use():
            pass
    handle.close()  # idempotent
    assert destroyed == [0xdead]


def test_a_handle_copies_as_itself_and_is_not_pickled() -> None:
    """A copy sharing the C pointer and the finalizer would let closing one destroy the
    handle the other still passes to C: copies are the handle itself, pickling refused."""
    import copy
    destroyed = []
    handle = stand_in_handle(destroyed)
    assert copy.copy(handle) is handle
    holder = {"model": [handle]}
    assert copy.deepcopy(holder)["model"][0] is handle
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(handle)
    handle.close()
    assert destroyed == [0xdead] and handle.closed


def test_c_sentences_that_name_o_say_it_is_the_out_argument() -> None:
    """The C API calls the output o; Python's argument is out. A sentence naming o gets a
    note, one naming other tensors (dout, lse) none."""
    from fa3._lib import raise_for_status, with_python_names
    names = {"o": "out"}
    for sentence in ("o overlaps q in memory: the output must not alias an input",
                     "o->seqlen (99) must equal q->seqlen (100)",
                     "lse overlaps o in memory: the (batch, heads, seqlen_q) fp32 LSE buffer "
                     "must be separate"):
        assert with_python_names(sentence, names) == sentence + " (o is the out argument)"
    for sentence in ("dout->seqlen must be >= 1 (got 0)",
                     "q->heads (8) must be a multiple of k->heads (3) (grouped-query attention)",
                     "kernel fa3_fwd_bf16_d128_m128_n128_s2_w2 does not fit this problem"):
        assert with_python_names(sentence, names) == sentence

    class StubLibrary:
        def last_error(self) -> str:
            return "o->heads (2) must equal q->heads (8)"

        def status_string(self, status: int) -> str:
            return "FA3_ERR_INVALID_ARGUMENT"

    with pytest.raises(fa3.Fa3Error) as raised:
        raise_for_status(StubLibrary(), int(fa3.Status.FA3_ERR_INVALID_ARGUMENT), "fa3_forward",
                         names)
    assert raised.value.detail == "o->heads (2) must equal q->heads (8) (o is the out argument)"
    assert raised.value.function == "fa3_forward"


def test_fa3_error_message_carries_status_and_sentence() -> None:
    error = fa3.Fa3Error(fa3.Status.FA3_ERR_UNSUPPORTED, "FA3_ERR_UNSUPPORTED",
                         "q.head_dim is 96; head_dim must be 64, 128 or 256", "fa3_forward")
    assert isinstance(error, RuntimeError)
    assert str(error) == ("fa3_forward: FA3_ERR_UNSUPPORTED: "
                          "q.head_dim is 96; head_dim must be 64, 128 or 256")
    # It crosses process boundaries (multiprocessing pickles a worker's exception) whole.
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is fa3.Fa3Error and str(again) == str(error)
    assert (again.status, again.status_name, again.detail, again.function) == (
        error.status, error.status_name, error.detail, error.function)


# ---- a second library in the same process (bench/compare.py's fa3-prev) -------------------


def _library_copy(library: str, directory: Path) -> Path:
    """The loaded library under another path: another file, as a previous build is."""
    directory.mkdir(parents=True, exist_ok=True)
    copy = directory / "libfa3.so"
    shutil.copy2(library, copy)
    return copy


def _address(function: Any) -> Optional[int]:
    return ctypes.cast(function, ctypes.c_void_p).value


def test_two_library_files_load_side_by_side(library: str, tmp_path: Path) -> None:
    first = fa3.open_library(_library_copy(library, tmp_path / "first"))
    second = fa3.open_library(_library_copy(library, tmp_path / "second"))
    default = _lib.get_library()
    paths = {first.library_path(), second.library_path(), default.path}
    assert len(paths) == 3, paths
    # Separate dlopen handles, so separate code and data (kernels, tables, handles, errors).
    handles = {first.library.cdll._handle, second.library.cdll._handle, default.cdll._handle}
    assert len(handles) == 3
    addresses = {_address(lib.fa3_kernel_count)
                 for lib in (first.library, second.library, default)}
    assert len(addresses) == 3
    assert first.kernels() == second.kernels() == fa3.kernels()
    # The same file's copies: the same functions (all of them, once the backward is built).
    assert first.library.missing == second.library.missing == default.missing


def test_each_library_gets_its_own_cached_handles(library: str, tmp_path: Path,
                                                   hopper: Any) -> None:
    """The per-device handle cache tells libraries apart by their dlopen handles, not by
    their paths: a loader-found library's path is read from /proc/self/maps and may name
    another loaded libfa3 file. A handle of one build must never reach the other's calls."""
    import torch
    from fa3.handle import handle_for_device
    first = fa3.open_library(_library_copy(library, tmp_path / "a")).library
    second = fa3.open_library(_library_copy(library, tmp_path / "b")).library
    second.path = first.path  # the same name, as such a path may read
    with torch.cuda.device(hopper):
        handles = [handle_for_device(hopper.index, lib) for lib in (first, second, first)]
    assert handles[0] is handles[2] and handles[0] is not handles[1]
    assert handles[0]._lib is first and handles[1]._lib is second


def test_each_library_keeps_its_own_last_error(library: str, tmp_path: Path) -> None:
    first = fa3.open_library(_library_copy(library, tmp_path / "first"))
    second = fa3.open_library(_library_copy(library, tmp_path / "second"))
    with pytest.raises(fa3.Fa3Error) as raised:
        second.validate_tuning_table(tmp_path / "missing.json")
    assert raised.value.status == fa3.Status.FA3_ERR_TUNING_TABLE
    assert "missing.json" in raised.value.detail
    assert "missing.json" in second.library.last_error()
    assert first.library.last_error() == ""


def test_the_same_file_is_the_same_library(library: str) -> None:
    again = fa3.open_library(library)
    assert again.library_path() == library
    assert again.library.cdll._handle == _lib.get_library().cdll._handle


def test_open_library_names_a_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "old" / "libfa3.so"
    with pytest.raises(fa3.LibraryNotFoundError) as raised:
        fa3.open_library(missing)
    assert str(missing) in str(raised.value)


@pytest.mark.skipif(_driver_present(), reason="a CUDA driver is present on this machine")
def test_a_handle_of_a_second_library_reports_through_it(library: str, tmp_path: Path) -> None:
    if not fa3.kernels():
        pytest.skip(f"{library} has no kernels, so fa3_create rejects its built-in tuning "
                    f"table before it looks for a driver")
    second = fa3.open_library(_library_copy(library, tmp_path / "second"))
    with pytest.raises(fa3.Fa3Error) as raised:
        fa3.Handle(0, library=second.library)
    assert raised.value.status == fa3.Status.FA3_ERR_NO_DRIVER
    assert raised.value.detail == second.library.last_error()
    # The Binding itself, as open_library returns it, names the same library.
    with pytest.raises(fa3.Fa3Error) as raised:
        fa3.Handle(0, library=second)
    assert raised.value.status == fa3.Status.FA3_ERR_NO_DRIVER
    assert raised.value.detail == second.library.last_error()
