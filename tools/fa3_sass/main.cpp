// fa3-sass: SASS inspection of fa3's kernels (issue 4). See docs/fa3_sass.md.
//
// Exit status: 0 every check passed, 1 a check failed, 2 usage or input error.

#include <fnmatch.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "analysis.h"
#include "disassembler.h"
#include "fa3_library.h"
#include "report.h"
#include "sass_text.h"

namespace fa3::sass {
namespace {

constexpr int kExitPass = 0, kExitCheckFailed = 1, kExitUsage = 2;

const char kUsage[] =
    "usage: fa3-sass [INPUT...] [--table FILE] [--json] [--svg FILE] [--dump-sass DIR] [--list]\n"
    "                [KERNEL-GLOB...]\n"
    "\n"
    "Disassembles fa3 kernels and checks their SASS: spills, setmaxnreg, TMA, wgmma use and\n"
    "serialization, fp8 QGMMA, the GEMM-softmax overlap (the 2-stage pipelining pattern of the\n"
    "paper's Appendix B.2 for _b2 kernels), and TMA multicast in 2-CTA cluster kernels; for\n"
    "backward kernels (fa3_bwd_*) the setmaxnreg counts, the dQ TMA reduce-adds, the five\n"
    "GEMMs of a step and P's exponentials under dP's GEMM, and no spills in their _pre and\n"
    "_post kernels (selected with them).\n"
    "\n"
    "inputs (repeatable; default: --lib with the libfa3.so next to this program)\n"
    "  --lib FILE     a libfa3.so: its embedded kernel cubins\n"
    "  --cubin FILE   a cubin\n"
    "  --sass FILE    SASS text from cuobjdump -sass or nvdisasm ('-' reads stdin); may also\n"
    "                 hold cuobjdump -res-usage output for registers and shared memory\n"
    "options\n"
    "  KERNEL-GLOB    analyze only kernels whose name matches (shell glob, e.g. '*_d128_*')\n"
    "  --table FILE   tuning-table JSON: kernels whose config has a \"loop\" other than\n"
    "                 \"sequential\" also get a pipelining check (as the name token _ov gives;\n"
    "                 \"b2_order\", like _ov_b2, the B.2 layout check)\n"
    "  --json         print the JSON report (schema fa3-sass/1) instead of text\n"
    "  --svg FILE     also write the mainloop pictures as SVG strips\n"
    "  --dump-sass DIR  also write each disassembled kernel's SASS (+ -res-usage) to DIR/NAME.sass:\n"
    "                 fixtures for test/sass/ straight from the GPU machine\n"
    "  --list         print the names of the selected kernels and exit\n"
    "  -h, --help     this text\n"
    "\n"
    "Disassembly needs cuobjdump or nvdisasm, looked for in $CUDA_HOME/bin, /usr/local/cuda/bin\n"
    "and PATH. Exit status: 0 all checks pass, 1 a check failed, 2 usage or input error.\n";

struct Options {
  std::vector<std::string> libraries, cubins, sass_files, globs;
  std::string table, svg, dump_dir;
  bool json = false, list = false, help = false;
};

// Thrown for usage and input errors; main prints the sentence and exits 2.
struct InputError {
  std::string message;
};

Options parse_options(int argc, char** argv) {
  Options o;
  auto value = [&](int& i) -> std::string {
    if (i + 1 >= argc) throw InputError{std::string(argv[i]) + " needs a value.\n\n" + kUsage};
    return argv[++i];
  };
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--lib")
      o.libraries.push_back(value(i));
    else if (arg == "--cubin")
      o.cubins.push_back(value(i));
    else if (arg == "--sass")
      o.sass_files.push_back(value(i));
    else if (arg == "--table")
      o.table = value(i);
    else if (arg == "--svg")
      o.svg = value(i);
    else if (arg == "--dump-sass")
      o.dump_dir = value(i);
    else if (arg == "--json")
      o.json = true;
    else if (arg == "--list")
      o.list = true;
    else if (arg == "-h" || arg == "--help")
      o.help = true;
    else if (arg.size() > 1 && arg[0] == '-' && arg != "-")
      throw InputError{"unknown option " + arg + ".\n\n" + kUsage};
    else
      o.globs.push_back(arg);
  }
  if (o.libraries.empty() && o.cubins.empty() && o.sass_files.empty())
    o.libraries.push_back(default_library_path());
  return o;
}

// ---- kernel selection -----------------------------------------------------------------

bool selected(const std::string& name, const std::vector<std::string>& globs) {
  if (globs.empty()) return true;
  for (const std::string& g : globs)
    if (::fnmatch(g.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

// A backward kernel's _pre and _post functions go with it: selecting the kernel selects them.
bool function_selected(const std::string& function, const std::vector<std::string>& globs) {
  return selected(function, globs) || selected(main_kernel_name(function), globs);
}

// Every glob must match something: a typo should not silently check nothing.
void require_every_glob_matches(const std::vector<std::string>& globs,
                                const std::vector<std::string>& names) {
  for (const std::string& g : globs) {
    bool matched = false;
    for (const std::string& n : names) matched |= ::fnmatch(g.c_str(), n.c_str(), 0) == 0;
    if (matched) continue;
    std::string known;
    for (const std::string& n : names) known += "\n  " + n;
    throw InputError{"no kernel matches '" + g + "'. The inputs hold " + std::to_string(names.size()) +
                     " kernel" + (names.size() == 1 ? "" : "s") + ":" + (known.empty() ? " none" : known)};
  }
}

// ---- inputs ---------------------------------------------------------------------------

std::string read_text(const std::string& path) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError{"cannot read " + path + ": " + std::strerror(errno) + "."};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The functions of a text that hold instructions (res-usage-only entries are dropped).
std::vector<SassFunction> functions_with_code(SassText text) {
  if (!text.listed_twice.empty())
    throw InputError{"the text lists " + text.listed_twice.front() +
                     " twice (a fatbin of several architectures, or two dumps of one kernel): "
                     "give one listing of each function."};
  std::vector<SassFunction> out;
  for (SassFunction& f : text.functions)
    if (!f.instructions.empty()) out.push_back(std::move(f));
  return out;
}

// The functions of a disassembled cubin, whole: a backward kernel's cubin with its kernel and
// every companion (missing_companions), and with cuobjdump every function's stack and local
// bytes (no_spills would otherwise judge on LDL/STL alone).
std::vector<SassFunction> functions_of_cubin(const Disassembler& d, const std::string& text,
                                             const std::string& what) {
  std::vector<SassFunction> functions = functions_with_code(parse_sass_text(text));
  if (functions.empty())
    throw InputError{what + " holds no function with instructions (" + d.program() + ")."};
  std::vector<std::string> names;
  for (const SassFunction& f : functions) {
    names.push_back(f.name);
    if (!d.cuobjdump.empty() && (!f.resources.stack_bytes || !f.resources.local_bytes))
      throw InputError{"cuobjdump -res-usage gave no stack or local size for " + f.name + " in " + what +
                       ": its spill check cannot be made."};
  }
  const std::vector<std::string> missing = missing_companions(names);
  if (!missing.empty()) {
    std::string list;
    for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
    throw InputError{what + " lacks " + list + ": a backward kernel's cubin holds the kernel, its _pre and "
                     "_post, and _lf where its config has one."};
  }
  return functions;
}

struct Inputs {
  std::vector<SassFunction> functions;  // not yet filtered by the globs (libraries excepted)
  std::vector<std::string> names;       // every kernel name seen, for glob messages
  std::vector<std::pair<std::string, std::string>> disassembled;  // (file stem, SASS text) for --dump-sass
  ReportSource source;
};

const Disassembler& disassembler_or_throw(const std::string& what) {
  static const Disassembler d = find_disassembler();
  if (!d.available()) throw InputError{"cannot disassemble " + what + ": " + no_disassembler_message(d)};
  return d;
}

std::string safe_file_name(const std::string& name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  return out.substr(0, 200) + ".cubin";
}

void add_sass_file(Inputs& in, const std::string& path) {
  std::vector<SassFunction> fns = functions_with_code(parse_sass_text(read_text(path)));
  if (fns.empty())
    throw InputError{(path == "-" ? std::string("standard input") : path) +
                     " holds no SASS instructions (expected the output of cuobjdump -sass or nvdisasm)."};
  for (SassFunction& f : fns) {
    in.names.push_back(f.name);
    in.functions.push_back(std::move(f));
  }
}

void add_cubin(Inputs& in, const std::string& path) {
  const Disassembler& d = disassembler_or_throw(path);
  if (::access(path.c_str(), R_OK) != 0)
    throw InputError{"cannot read " + path + ": " + std::strerror(errno) + "."};
  std::string error;
  std::optional<std::string> text = disassemble_cubin(d, path, error);
  if (!text) throw InputError{error};
  in.source.disassembler = d.program();
  in.disassembled.emplace_back(std::filesystem::path(path).stem().string(), *text);
  for (SassFunction& f : functions_of_cubin(d, *text, path)) {
    in.names.push_back(f.name);
    in.functions.push_back(std::move(f));
  }
}

// Only the selected kernels are disassembled: a glob makes a run over the library fast.
void add_library(Inputs& in, const std::string& path, const Options& o) {
  std::string error;
  std::optional<Fa3Library> lib = Fa3Library::open(path, error);
  if (!lib) throw InputError{error};
  const std::vector<std::string> names = lib->kernel_names();
  in.names.insert(in.names.end(), names.begin(), names.end());
  if (o.list) {
    for (const std::string& n : names)
      if (selected(n, o.globs)) in.functions.push_back(SassFunction{n, {}, {}, {}});
    return;
  }
  TempDir tmp;
  for (const std::string& name : names) {
    if (!selected(name, o.globs)) continue;
    const Disassembler& d = disassembler_or_throw("the kernels of " + path);
    if (!tmp.ok()) throw InputError{"cannot create a temporary directory for the cubins."};
    const void* data = nullptr;
    size_t size = 0;
    if (!lib->cubin(name, &data, &size, error)) throw InputError{error + "."};
    const std::string file = tmp.write(safe_file_name(name), data, size);
    if (file.empty()) throw InputError{"cannot write the cubin of " + name + " to " + tmp.path() + "."};
    std::optional<std::string> text = disassemble_cubin(d, file, error);
    if (!text) throw InputError{error};
    in.source.disassembler = d.program();
    in.disassembled.emplace_back(name, *text);
    // The kernel, then the functions of its cubin that go with it (a backward kernel's _pre
    // and _post), whatever order the disassembler lists them in.
    std::vector<SassFunction> functions = functions_of_cubin(d, *text, "the cubin of " + name);
    std::vector<std::string> wanted = {name};
    for (const std::string& c : companion_kernels(name)) wanted.push_back(c);
    for (const std::string& w : wanted) {
      auto f = std::find_if(functions.begin(), functions.end(), [&](const SassFunction& g) { return g.name == w; });
      if (f == functions.end())
        throw InputError{"the cubin of " + name + " holds no function " + w + " with instructions (" +
                         d.program() + "): it cannot be checked."};
      in.functions.push_back(std::move(*f));
    }
  }
}

Inputs gather_inputs(const Options& o) {
  Inputs in;
  auto add_kind = [&](const char* kind, const std::vector<std::string>& paths) {
    if (paths.empty()) return;
    in.source.kind += (in.source.kind.empty() ? "" : "+") + std::string(kind);
    in.source.paths.insert(in.source.paths.end(), paths.begin(), paths.end());
  };
  add_kind("library", o.libraries);
  add_kind("cubin", o.cubins);
  add_kind("sass", o.sass_files);
  for (const std::string& p : o.sass_files) add_sass_file(in, p);
  for (const std::string& p : o.cubins) add_cubin(in, p);
  for (const std::string& p : o.libraries) add_library(in, p, o);
  require_every_glob_matches(o.globs, in.names);
  return in;
}

// ---- analysis and output --------------------------------------------------------------

std::vector<KernelReport> analyze(const Inputs& in, const Options& o) {
  std::map<std::string, TableFlags> table;
  if (!o.table.empty()) {
    std::string error;
    auto flags = read_tuning_table_flags(o.table, error);
    if (!flags) throw InputError{error};
    table = *flags;
  }
  std::vector<KernelReport> reports;
  for (const SassFunction& f : in.functions) {
    if (!function_selected(f.name, o.globs)) continue;
    KernelTraits traits = traits_from_name(f.name);
    if (auto it = table.find(f.name); it != table.end()) apply_table_flags(traits, it->second);
    reports.push_back(analyze_kernel(f, traits));
  }
  return reports;
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  if (!out) throw InputError{"cannot write " + path + ": " + std::strerror(errno) + "."};
}

void dump_sass(const Inputs& in, const std::string& dir) {
  if (in.disassembled.empty())
    throw InputError{
        "--dump-sass has nothing to write: it saves what fa3-sass disassembles (--lib, --cubin)."};
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError{"cannot create " + dir + ": " + ec.message() + "."};
  for (const auto& [stem, text] : in.disassembled) write_file(dir + "/" + stem + ".sass", text);
}

int run(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  if (o.help) {
    std::cout << kUsage;
    return kExitPass;
  }
  const Inputs in = gather_inputs(o);
  if (o.list) {
    for (const SassFunction& f : in.functions)
      if (function_selected(f.name, o.globs)) std::cout << f.name << "\n";
    return kExitPass;
  }
  if (!o.dump_dir.empty()) dump_sass(in, o.dump_dir);
  const std::vector<KernelReport> reports = analyze(in, o);
  if (reports.empty()) throw InputError{"no kernels to analyze: the inputs hold none."};
  if (!o.svg.empty()) write_file(o.svg, svg_report(reports));
  std::cout << (o.json ? json_report(reports, in.source) : text_report(reports, in.source));
  for (const KernelReport& r : reports)
    if (!r.pass()) return kExitCheckFailed;
  return kExitPass;
}

}  // namespace
}  // namespace fa3::sass

int main(int argc, char** argv) {
  try {
    return fa3::sass::run(argc, argv);
  } catch (const fa3::sass::InputError& e) {
    std::cerr << "fa3-sass: " << e.message << "\n";
    return fa3::sass::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "fa3-sass: " << e.what() << "\n";
    return fa3::sass::kExitUsage;
  }
}
