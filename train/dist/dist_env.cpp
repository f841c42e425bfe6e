#include "train/dist/dist_env.h"

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>

#include "core/error.h"

namespace ft {

namespace {

using Getenv = std::function<const char*(const char*)>;

// nullptr when unset or empty.
const char* get(const Getenv& getenv_fn, const char* name) {
  const char* v = getenv_fn(name);
  return (v && *v) ? v : nullptr;
}

long long parse_int(const char* name, const char* value) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(value, &end, 10);
  // strtoll skips leading blanks; " 1" is accepted, "1x" and "" are not.
  if (end == value || *end != '\0' || errno == ERANGE || v < INT_MIN || v > INT_MAX)
    throw Error(str("distributed environment: ", name, "='", value, "' is not an integer"));
  return v;
}

struct RankVars {
  const char* launcher;
  const char* rank;
  const char* world;
  const char* world_alt;  // another name for the world size, or nullptr
  const char* local;
};

// Reads one launcher's variables; false when its rank variable and world variable are both unset.
bool read_rank_vars(const Getenv& getenv_fn, const RankVars& rv, DistEnv& env) {
  const char* rank = get(getenv_fn, rv.rank);
  const char* world_name = rv.world;
  const char* world = get(getenv_fn, rv.world);
  if (!world && rv.world_alt) {
    world_name = rv.world_alt;
    world = get(getenv_fn, rv.world_alt);
  }
  if (!rank && !world) return false;
  if (!rank) throw Error(str("distributed environment: ", world_name, "='", world, "' is set but ", rv.rank, " is not"));
  if (!world) throw Error(str("distributed environment: ", rv.rank, "='", rank, "' is set but ", rv.world, " is not"));
  const long long w = parse_int(world_name, world);
  if (w < 1) throw Error(str("distributed environment: ", world_name, "='", world, "' must be >= 1"));
  const long long r = parse_int(rv.rank, rank);
  if (r < 0 || r >= w)
    throw Error(str("distributed environment: ", rv.rank, "='", rank, "' is out of range for ", world_name, "=", w,
                    " (ranks are 0..", w - 1, ")"));
  long long l = 0;
  if (const char* local = get(getenv_fn, rv.local)) {
    l = parse_int(rv.local, local);
    if (l < 0 || l >= w)
      throw Error(str("distributed environment: ", rv.local, "='", local, "' is out of range for ", world_name, "=", w));
  }
  env.launcher = rv.launcher;
  env.rank = static_cast<int>(r);
  env.world_size = static_cast<int>(w);
  env.local_rank = static_cast<int>(l);
  return true;
}

// The first host of a Slurm host list: "gpu[03-05,9],cpu1" -> "gpu03", "node7,node8" -> "node7".
std::string first_slurm_host(const std::string& list) {
  std::string host;
  for (size_t i = 0; i < list.size(); ++i) {
    const char c = list[i];
    if (c == ',') break;
    if (c == '[') {
      // The first number (or range start) inside the brackets, keeping its leading zeros.
      size_t j = i + 1;
      while (j < list.size() && std::isdigit(static_cast<unsigned char>(list[j]))) host += list[j++];
      return host;
    }
    host += c;
  }
  return host;
}

}  // namespace

DistEnv detect_dist_env(const std::function<const char*(const char*)>& getenv_fn) {
  DistEnv env;
  const char* flashtrain_launcher = get(getenv_fn, "FLASHTRAIN_LAUNCHER");
  const bool found =
      read_rank_vars(getenv_fn, {"torchrun", "RANK", "WORLD_SIZE", nullptr, "LOCAL_RANK"}, env) ||
      read_rank_vars(getenv_fn, {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_NPROCS", "SLURM_LOCALID"}, env) ||
      read_rank_vars(getenv_fn, {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", nullptr, "OMPI_COMM_WORLD_LOCAL_RANK"}, env);
  if (found && env.launcher == std::string("torchrun") && flashtrain_launcher &&
      std::string(flashtrain_launcher) == "flashtrain")
    env.launcher = "flashtrain";

  const bool slurm = env.launcher == std::string("slurm");
  if (const char* addr = get(getenv_fn, "MASTER_ADDR")) {
    env.master_addr = addr;
  } else if (slurm) {
    const char* nodes = get(getenv_fn, "SLURM_STEP_NODELIST");
    if (!nodes) nodes = get(getenv_fn, "SLURM_JOB_NODELIST");
    if (nodes) {
      const std::string host = first_slurm_host(nodes);
      if (!host.empty()) env.master_addr = host;
    }
  }
  if (const char* port = get(getenv_fn, "MASTER_PORT")) {
    const long long p = parse_int("MASTER_PORT", port);
    if (p < 1 || p > 65535)
      throw Error(str("distributed environment: MASTER_PORT='", port, "' is out of range (1..65535)"));
    env.master_port = static_cast<int>(p);
  } else if (slurm) {
    if (const char* job = get(getenv_fn, "SLURM_JOB_ID")) {
      const long long j = parse_int("SLURM_JOB_ID", job);
      if (j < 0) throw Error(str("distributed environment: SLURM_JOB_ID='", job, "' must be >= 0"));
      env.master_port = static_cast<int>(10000 + j % 20000);
    }
  }

  for (const char* name : {"FLASHTRAIN_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"}) {
    if (const char* id = get(getenv_fn, name)) {
      env.job_id = id;
      break;
    }
  }
  if (env.job_id.empty()) env.job_id = str("flashtrain@", env.master_addr, ":", env.master_port);
  return env;
}

std::string describe(const DistEnv& env) {
  return str("rank ", env.rank, " of ", env.world_size, " (local ", env.local_rank, ", ", env.launcher, ", job ", env.job_id,
             ", master ", env.master_addr, ":", env.master_port, ")");
}

}  // namespace ft
