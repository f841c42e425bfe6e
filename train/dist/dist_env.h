// Where a rank learns who it is: the process group of a data-parallel job, read from the
// environment that the common launchers set. No sockets and no GPU here (rendezvous.h joins).
//
// Sources, first match wins (a torchrun started under srun still sets RANK, so it wins over Slurm):
//   "flashtrain"  RANK, WORLD_SIZE, LOCAL_RANK set by `flashtrain train --nproc N`
//                 (train/dist/local_launcher.h), which also sets FLASHTRAIN_LAUNCHER=flashtrain
//   "torchrun"    RANK, WORLD_SIZE [, LOCAL_RANK (default 0)]
//   "slurm"       SLURM_PROCID, SLURM_NTASKS (or SLURM_NPROCS) [, SLURM_LOCALID (default 0)]
//   "openmpi"     OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE [, OMPI_COMM_WORLD_LOCAL_RANK (0)]
//   "single"      none of the above: rank 0 of 1
// MASTER_ADDR (default 127.0.0.1) and MASTER_PORT (default 29500) always come from the
// environment. srun and mpirun do not set them: export them (`mpirun -x MASTER_ADDR -x
// MASTER_PORT`). Under Slurm, when they are not exported, MASTER_ADDR defaults to the first host
// of SLURM_STEP_NODELIST / SLURM_JOB_NODELIST ("gpu[03-05,9]" -> "gpu03") and MASTER_PORT to
// 10000 + SLURM_JOB_ID % 20000, so every task of one job agrees without any export.
// The job id (the rendezvous admits only its own job's ranks): FLASHTRAIN_JOB_ID, else
// TORCHELASTIC_RUN_ID, SLURM_JOB_ID, OMPI_MCA_ess_base_jobid, PMIX_NAMESPACE, else
// "flashtrain@<master_addr>:<master_port>".
//
// Every bad value throws a one-line ft::Error naming the variable and the value: a non-number,
// a negative rank, rank >= world size, world size < 1, local rank >= world size, a port outside
// 1..65535, a rank variable without its world-size partner (or the reverse).
#pragma once

#include <cstdlib>
#include <functional>
#include <string>

namespace ft {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // the GPU this rank uses on its host
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string job_id;
  std::string launcher = "single";  // "single" | "flashtrain" | "torchrun" | "slurm" | "openmpi"

  bool distributed() const { return world_size > 1; }
};

// getenv_fn returns nullptr for an unset variable (tests pass a map lookup). An empty value counts
// as unset.
DistEnv detect_dist_env(const std::function<const char*(const char*)>& getenv_fn = ::getenv);

// "rank 1 of 4 (local 1, torchrun, job J, master 10.0.0.1:29500)", for start-up logs.
std::string describe(const DistEnv& env);

}  // namespace ft
