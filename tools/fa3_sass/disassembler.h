// Finding and running the CUDA binary utilities (cuobjdump, nvdisasm). They exist only on
// machines with the full toolkit; everything else in fa3-sass works without them.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace fa3::sass {

struct Disassembler {
  std::string cuobjdump;  // full path, or "" when not found
  std::string nvdisasm;
  std::vector<std::string> searched;  // the directories looked in, for the message

  bool available() const { return !cuobjdump.empty() || !nvdisasm.empty(); }
  const std::string& program() const { return cuobjdump.empty() ? nvdisasm : cuobjdump; }
};

// Looks in cuda_home/bin, /usr/local/cuda/bin and each directory of path_list (":"-separated),
// in that order; cuobjdump is preferred because it also reports register and shared usage.
Disassembler find_disassembler(const std::string& cuda_home, const std::string& path_list);
// Same, from $CUDA_HOME and $PATH.
Disassembler find_disassembler();
// One sentence (and a hint) for when none is found.
std::string no_disassembler_message(const Disassembler& d);

struct CommandResult {
  int exit_code = -1;  // 127 when the program could not be started
  std::string out, err;
};
// Runs argv[0] with arguments argv[1..] (no shell), collecting stdout and stderr.
CommandResult run_command(const std::vector<std::string>& argv);

// A cubin file's SASS text, with `cuobjdump -res-usage` appended when cuobjdump is the tool
// (parse_sass_text reads both). nullopt and a sentence in `error` on failure.
std::optional<std::string> disassemble_cubin(const Disassembler& d, const std::string& cubin_path,
                                             std::string& error);

// A private directory under $TMPDIR (or /tmp), removed with its files on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  bool ok() const { return !path_.empty(); }
  const std::string& path() const { return path_; }
  // Writes a file in the directory; returns its path, or "" on failure.
  std::string write(const std::string& name, const void* data, size_t size);

 private:
  std::string path_;
  std::vector<std::string> files_;
};

}  // namespace fa3::sass
