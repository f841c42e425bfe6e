// Tests that run programs as separate processes: the flashtrain binary beside the test binary,
// fork + exec with extra environment and the output in files, a bounded wait, and `env` output
// read back. exec()ed, not just forked, where a rank needs a CUDA context (which does not survive
// fork) or must be the real command line.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace ft::test {

// <build>/flashtrain, for a test binary at <build>/tests/<name>.
inline std::string flashtrain_binary() {
  namespace fs = std::filesystem;
  return (fs::read_symlink("/proc/self/exe").parent_path().parent_path() / "flashtrain").string();
}

// exec()s flashtrain with `args` and extra environment; stdout to out_path, stderr to err_path.
inline pid_t spawn_flashtrain(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                              const std::string& out_path, const std::string& err_path) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!std::freopen(out_path.c_str(), "w", stdout) || !std::freopen(err_path.c_str(), "w", stderr)) std::_Exit(120);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<std::string> argv_s{flashtrain_binary()};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::_Exit(127);
  }
  return pid;
}

// Exit status (128 + signal), or -1 when still running after timeout_s (then SIGKILLed).
inline int wait_for_exit(pid_t pid, double timeout_s) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  for (;;) {
    int ws = 0;
    if (::waitpid(pid, &ws, WNOHANG) == pid)
      return WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : -1;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// KEY=VALUE lines (as `env` prints them) into a map.
inline std::map<std::string, std::string> parse_env(const std::string& text) {
  std::map<std::string, std::string> m;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) m[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return m;
}

// A getenv over such a map (for detect_dist_env and friends); `m` must outlive it.
inline std::function<const char*(const char*)> getenv_of(const std::map<std::string, std::string>& m) {
  return [&m](const char* name) -> const char* {
    const auto it = m.find(name);
    return it == m.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace ft::test
