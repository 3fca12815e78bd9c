#include "disassembler.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace fa3::sass {

namespace {

bool is_executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

std::vector<std::string> split_path_list(const std::string& list) {
  std::vector<std::string> dirs;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(':', start);
    if (end == std::string::npos) end = list.size();
    if (end > start) dirs.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return dirs;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// Reads both pipes until the child closes them; poll so neither pipe can fill and block it.
void drain(int out_fd, int err_fd, std::string& out, std::string& err) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {&out, &err};
  int open = 2;
  char buf[65536];
  while (open > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
}

std::string first_line(const std::string& s) {
  const size_t end = s.find('\n');
  return s.substr(0, end);
}

}  // namespace

Disassembler find_disassembler(const std::string& cuda_home, const std::string& path_list) {
  Disassembler d;
  if (!cuda_home.empty()) d.searched.push_back(cuda_home + "/bin");
  d.searched.push_back("/usr/local/cuda/bin");
  for (const std::string& dir : split_path_list(path_list)) d.searched.push_back(dir);
  for (const std::string& dir : d.searched) {
    if (d.cuobjdump.empty() && is_executable(dir + "/cuobjdump")) d.cuobjdump = dir + "/cuobjdump";
    if (d.nvdisasm.empty() && is_executable(dir + "/nvdisasm")) d.nvdisasm = dir + "/nvdisasm";
  }
  return d;
}

Disassembler find_disassembler() { return find_disassembler(env("CUDA_HOME"), env("PATH")); }

std::string no_disassembler_message(const Disassembler& d) {
  std::string dirs;
  for (size_t i = 0; i < d.searched.size() && i < 4; ++i) dirs += (i ? ", " : "") + d.searched[i];
  if (d.searched.size() > 4) dirs += " and the rest of PATH";
  return "no SASS disassembler: neither cuobjdump nor nvdisasm is in " + dirs +
         ". Install the CUDA toolkit's binary utilities (or set CUDA_HOME), or give SASS text with --sass "
         "FILE.";
}

CommandResult run_command(const std::vector<std::string>& argv) {
  CommandResult r;
  int out_pipe[2], err_pipe[2];
  if (argv.empty() || ::pipe(out_pipe) != 0) return r;
  if (::pipe(err_pipe) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return r;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (pid < 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    r.err = std::string("fork failed: ") + std::strerror(errno);
    return r;
  }
  drain(out_pipe[0], err_pipe[0], r.out, r.err);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

std::optional<std::string> disassemble_cubin(const Disassembler& d, const std::string& cubin_path,
                                             std::string& error) {
  if (!d.available()) {
    error = no_disassembler_message(d);
    return std::nullopt;
  }
  const bool use_cuobjdump = !d.cuobjdump.empty();
  const std::vector<std::string> sass_cmd = use_cuobjdump
                                                ? std::vector<std::string>{d.cuobjdump, "-sass", cubin_path}
                                                : std::vector<std::string>{d.nvdisasm, "-c", cubin_path};
  CommandResult sass = run_command(sass_cmd);
  if (sass.exit_code != 0) {
    error = sass_cmd[0] + " could not disassemble " + cubin_path + " (exit " +
            std::to_string(sass.exit_code) + "): " + first_line(sass.err.empty() ? sass.out : sass.err);
    return std::nullopt;
  }
  if (use_cuobjdump) {
    // Registers, shared, stack and local memory: the spill check needs the last two.
    CommandResult usage = run_command({d.cuobjdump, "-res-usage", cubin_path});
    if (usage.exit_code != 0) {
      error = d.cuobjdump + " -res-usage failed on " + cubin_path + " (exit " + std::to_string(usage.exit_code) +
              "): " + first_line(usage.err.empty() ? usage.out : usage.err);
      return std::nullopt;
    }
    sass.out += "\n" + usage.out;
  }
  return sass.out;
}

TempDir::TempDir() {
  std::string base = env("TMPDIR");
  if (base.empty()) base = "/tmp";
  std::string templ = base + "/fa3-sass-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data())) path_ = buf.data();
}

TempDir::~TempDir() {
  for (const std::string& f : files_) std::remove(f.c_str());
  if (!path_.empty()) ::rmdir(path_.c_str());
}

std::string TempDir::write(const std::string& name, const void* data, size_t size) {
  if (path_.empty()) return "";
  const std::string file = path_ + "/" + name;
  std::ofstream out(file, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) return "";
  files_.push_back(file);
  return file;
}

}  // namespace fa3::sass
