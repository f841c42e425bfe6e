#include "train/dist/local_launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <random>
#include <thread>

#include "core/error.h"
#include "train/dist/rendezvous.h"

extern char** environ;

namespace ft {

namespace {

// The signal the launcher received while waiting (SIGINT/SIGTERM), 0 if none. One launch runs at a
// time per process; the handler only stores.
volatile sig_atomic_t g_launcher_signal = 0;

extern "C" void launcher_on_signal(int sig) { g_launcher_signal = sig; }

const char* signal_name(int sig) {
  switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU";
    case SIGSYS: return "SIGSYS";
    default: return nullptr;
  }
}

std::string signal_text(int sig) {
  const char* n = signal_name(sig);
  return n ? std::string(n) : str("signal ", sig);
}

bool overridden(const char* entry) {
  static const char* const kNames[] = {"RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=", "MASTER_ADDR=",
                                       "MASTER_PORT=", "FLASHTRAIN_JOB_ID=", "FLASHTRAIN_LAUNCHER=",
                                       // a rank is no launcher: the node variables stop here
                                       "NNODES=", "NODE_RANK="};
  for (const char* n : kNames)
    if (std::strncmp(entry, n, std::strlen(n)) == 0) return true;
  return false;
}

// Restores the launcher's SIGINT/SIGTERM handling when it returns or throws.
struct SignalGuard {
  struct sigaction old_int {}, old_term {};
  SignalGuard() {
    g_launcher_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = launcher_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
  }
  ~SignalGuard() {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
  }
};

}  // namespace

std::vector<std::string> without_nproc(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      out.insert(out.end(), args.begin() + static_cast<long>(i), args.end());
      break;
    }
    if (args[i] == "--nproc") {
      ++i;  // and its value
      continue;
    }
    if (args[i].rfind("--nproc=", 0) == 0) continue;
    out.push_back(args[i]);
  }
  return out;
}

LaunchOptions node_launch_options(const std::function<const char*(const char*)>& getenv_fn) {
  auto get = [&](const char* name) -> const char* {
    const char* v = getenv_fn(name);
    return v && *v ? v : nullptr;
  };
  auto integer = [&](const char* name, long long lo, long long hi) {
    const char* v = get(name);
    char* end = nullptr;
    errno = 0;
    const long long x = std::strtoll(v, &end, 10);
    if (end == v || *end != '\0' || errno == ERANGE || x < lo || x > hi)
      throw Error(str("launcher environment: ", name, "='", v, "' is not an integer in ", lo, "..", hi));
    return static_cast<int>(x);
  };
  LaunchOptions o;
  if (get("NNODES")) o.nnodes = integer("NNODES", 1, 4096);
  if (get("NODE_RANK")) o.node_rank = integer("NODE_RANK", 0, 4095);
  FT_CHECK_ARG(o.node_rank < o.nnodes, "launcher environment: NODE_RANK=", o.node_rank, " must be below NNODES=",
               o.nnodes);
  if (o.nnodes == 1) return o;  // one node: the launcher picks its own port, as without NNODES
  FT_CHECK_ARG(get("MASTER_ADDR") && get("MASTER_PORT"), "launcher environment: NNODES=", o.nnodes,
               " needs MASTER_ADDR and MASTER_PORT (node 0's address and a port every node uses)");
  o.master_addr = get("MASTER_ADDR");
  o.master_port = integer("MASTER_PORT", 1, 65535);
  if (get("FLASHTRAIN_JOB_ID")) o.job_id = get("FLASHTRAIN_JOB_ID");
  return o;
}

int launch_local(int nproc, const std::vector<std::string>& child_args, std::ostream& log, const LaunchOptions& options) {
  FT_CHECK_ARG(nproc >= 1 && nproc <= 1024, "launch_local: nproc = ", nproc, " must be in 1..1024");
  FT_CHECK_ARG(options.grace_s >= 0, "launch_local: grace ", options.grace_s, " s must be >= 0");
  FT_CHECK_ARG(options.nnodes >= 1 && options.node_rank >= 0 && options.node_rank < options.nnodes,
               "launch_local: node rank ", options.node_rank, " of ", options.nnodes, " nodes");
  const bool nodes = options.nnodes > 1;
  FT_CHECK_ARG(!nodes || options.master_port > 0, "launch_local: ", options.nnodes,
               " nodes need a master port that every node knows");
  const int port = options.master_port > 0 ? options.master_port : pick_free_port();
  std::random_device rd;
  // One node: a fresh id per launch. Several: every node's launcher must derive the same one.
  const std::string job_id = !options.job_id.empty() ? options.job_id
                             : nodes ? str("flashtrain-nodes@", options.master_addr, ":", port)
                                     : str("flashtrain-local-", ::getpid(), "-", port, "-", std::hex, rd());
  const int first_rank = options.node_rank * nproc, world = options.nnodes * nproc;

  // Everything the children need is built before the first fork: between fork and exec only
  // async-signal-safe calls are allowed (the launcher may have threads).
  // argv[0]: the program's real path, so `ps` shows what runs (exec still goes through
  // /proc/self/exe, which names this binary even if the file was rebuilt meanwhile).
  std::string argv0 = options.exe;
  if (options.exe == "/proc/self/exe") {
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n > 0) argv0.assign(buf, static_cast<size_t>(n));
  }
  std::vector<std::string> argv_s = {argv0};
  argv_s.insert(argv_s.end(), child_args.begin(), child_args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> base;
  for (char** e = environ; e && *e; ++e)
    if (!overridden(*e)) base.emplace_back(*e);
  std::vector<std::vector<std::string>> env_s(static_cast<size_t>(nproc), base);
  std::vector<std::vector<char*>> envp(static_cast<size_t>(nproc));
  for (int r = 0; r < nproc; ++r) {
    auto& e = env_s[static_cast<size_t>(r)];
    e.push_back(str("RANK=", first_rank + r));
    e.push_back(str("WORLD_SIZE=", world));
    e.push_back(str("LOCAL_RANK=", r));
    e.push_back(str("LOCAL_WORLD_SIZE=", nproc));
    e.push_back("MASTER_ADDR=" + options.master_addr);
    e.push_back(str("MASTER_PORT=", port));
    e.push_back("FLASHTRAIN_JOB_ID=" + job_id);
    e.push_back("FLASHTRAIN_LAUNCHER=flashtrain");
    for (auto& s : e) envp[static_cast<size_t>(r)].push_back(s.data());
    envp[static_cast<size_t>(r)].push_back(nullptr);
  }
  const char* exe = options.exe.c_str();
  const std::string exec_failed = str("flashtrain: cannot run ", options.exe, "\n");

  SignalGuard guard;
  // SIGINT/SIGTERM stay blocked across each fork until the child has its default handlers back:
  // one arriving in between would otherwise run the launcher's handler in the child and be lost.
  sigset_t stop_signals, old_mask;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  const pid_t parent = ::getpid();
  std::vector<pid_t> pids;
  std::vector<bool> alive;
  for (int r = 0; r < nproc; ++r) {
    pthread_sigmask(SIG_BLOCK, &stop_signals, &old_mask);
    const pid_t pid = ::fork();
    if (pid == 0) {
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      sigaction(SIGINT, &dfl, nullptr);
      sigaction(SIGTERM, &dfl, nullptr);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      // A launcher killed by SIGKILL cannot stop its ranks; the kernel does it for us.
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != parent) ::_exit(1);
      ::execve(exe, argv.data(), envp[static_cast<size_t>(r)].data());
      [[maybe_unused]] const ssize_t k = ::write(2, exec_failed.data(), exec_failed.size());
      ::_exit(127);
    }
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    if (pid < 0) {
      const int e = errno;
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      throw Error(str("launch_local: fork of rank ", r, " failed: ", std::strerror(e)));
    }
    pids.push_back(pid);
    alive.push_back(true);
  }

  using Clock = std::chrono::steady_clock;
  int n_alive = nproc;
  int rc = 0;
  bool stopping = false, killed = false, forwarded = false;
  Clock::time_point kill_at;
  auto stop_others = [&](int sig) {
    for (size_t i = 0; i < pids.size(); ++i)
      if (alive[i]) ::kill(pids[i], sig);
  };
  auto begin_stop = [&] {
    stopping = true;
    kill_at = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options.grace_s));
  };
  while (n_alive > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (!alive[i]) continue;
      int st = 0;
      const pid_t w = ::waitpid(pids[i], &st, WNOHANG);
      if (w == 0 || (w < 0 && errno == EINTR)) continue;
      alive[i] = false;
      --n_alive;
      if (w < 0) st = 0;  // reaped elsewhere: nothing to report
      const bool failed = WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0);
      if (failed && !stopping) {
        const std::string how = WIFSIGNALED(st) ? str("signal ", signal_text(WTERMSIG(st))) : str("status ", WEXITSTATUS(st));
        rc = WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
        log << "flashtrain: rank " << first_rank + static_cast<int>(i) << " exited with " << how;
        if (n_alive > 0) log << "; stopping the other ranks";
        log << std::endl;
        begin_stop();
        stop_others(SIGTERM);
      }
    }
    const int sig = g_launcher_signal;
    if (sig != 0 && !forwarded) {
      forwarded = true;
      if (!stopping) {
        rc = 128 + sig;
        log << "flashtrain: got " << signal_text(sig) << "; passing it on to the ranks" << std::endl;
        begin_stop();
      }
      stop_others(sig);
    }
    if (stopping && !killed && n_alive > 0 && Clock::now() >= kill_at) {
      killed = true;
      log << "flashtrain: " << n_alive << " rank(s) still running " << options.grace_s << " s after SIGTERM; sending SIGKILL"
          << std::endl;
      stop_others(SIGKILL);
    }
    if (n_alive > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return rc;
}

}  // namespace ft
