#include "train/dist/dist_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/error.h"

namespace ft {
namespace {

using Vars = std::map<std::string, std::string>;

DistEnv detect(const Vars& vars) {
  return detect_dist_env([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(DistEnv, NothingSetIsASingleProcess) {
  const DistEnv e = detect({});
  EXPECT_EQ(e.launcher, "single");
  EXPECT_EQ(e.rank, 0);
  EXPECT_EQ(e.world_size, 1);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_FALSE(e.distributed());
  EXPECT_EQ(e.master_addr, "127.0.0.1");
  EXPECT_EQ(e.master_port, 29500);
  EXPECT_EQ(e.job_id, "flashtrain@127.0.0.1:29500");
}

TEST(DistEnv, Torchrun) {
  const DistEnv e = detect({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "10.1.2.3"},
                            {"MASTER_PORT", "1234"}, {"TORCHELASTIC_RUN_ID", "run-7"}});
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_TRUE(e.distributed());
  EXPECT_EQ(e.master_addr, "10.1.2.3");
  EXPECT_EQ(e.master_port, 1234);
  EXPECT_EQ(e.job_id, "run-7");
  EXPECT_EQ(describe(e), "rank 5 of 8 (local 1, torchrun, job run-7, master 10.1.2.3:1234)");
}

TEST(DistEnv, TorchrunWithoutLocalRankOrJobId) {
  const DistEnv e = detect({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "4000"}});
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.job_id, "flashtrain@127.0.0.1:4000");
}

TEST(DistEnv, FlashtrainLauncherAndJobIdPrecedence) {
  const DistEnv e = detect({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"FLASHTRAIN_LAUNCHER", "flashtrain"},
                            {"FLASHTRAIN_JOB_ID", "local-1"}, {"TORCHELASTIC_RUN_ID", "te"}, {"SLURM_JOB_ID", "99"}});
  EXPECT_EQ(e.launcher, "flashtrain");
  EXPECT_EQ(e.job_id, "local-1");
}

TEST(DistEnv, SlurmDerivesMasterFromNodeListAndJobId) {
  const DistEnv e = detect({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "3"}, {"SLURM_JOB_ID", "123456"},
                            {"SLURM_JOB_NODELIST", "gpu[07-08,12],cpu1"}});
  EXPECT_EQ(e.launcher, "slurm");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.world_size, 8);
  EXPECT_EQ(e.local_rank, 3);
  EXPECT_EQ(e.master_addr, "gpu07");
  EXPECT_EQ(e.master_port, 10000 + 123456 % 20000);
  EXPECT_EQ(e.job_id, "123456");
}

TEST(DistEnv, SlurmNodeListForms) {
  const std::map<std::string, std::string> cases = {
      {"node7,node8", "node7"}, {"a-[003-005,010],b1", "a-003"}, {"single", "single"}, {"x[9]", "x9"}};
  for (const auto& [list, host] : cases) {
    const DistEnv e = detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_NODELIST", list}});
    EXPECT_EQ(e.master_addr, host) << list;
  }
}

TEST(DistEnv, SlurmExportedMasterWinsAndNprocsIsAccepted) {
  const DistEnv e = detect({{"SLURM_PROCID", "1"}, {"SLURM_NPROCS", "2"}, {"SLURM_JOB_ID", "5"}, {"SLURM_JOB_NODELIST", "n[1-2]"},
                            {"MASTER_ADDR", "head"}, {"MASTER_PORT", "2222"}});
  EXPECT_EQ(e.world_size, 2);
  EXPECT_EQ(e.master_addr, "head");
  EXPECT_EQ(e.master_port, 2222);
}

TEST(DistEnv, OpenMpi) {
  const DistEnv e = detect({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                            {"OMPI_MCA_ess_base_jobid", "42"}, {"MASTER_ADDR", "h0"}});
  EXPECT_EQ(e.launcher, "openmpi");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.world_size, 2);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.master_addr, "h0");
  EXPECT_EQ(e.master_port, 29500);
  EXPECT_EQ(e.job_id, "42");
}

TEST(DistEnv, TorchrunUnderSlurmTakesTorchrunsRank) {
  const DistEnv e = detect({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(e.launcher, "torchrun");
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.world_size, 4);
}

TEST(DistEnv, EmptyValuesCountAsUnset) {
  const DistEnv e = detect({{"RANK", ""}, {"WORLD_SIZE", ""}, {"MASTER_PORT", ""}});
  EXPECT_EQ(e.launcher, "single");
  EXPECT_EQ(e.master_port, 29500);
}

TEST(DistEnv, BadValuesAreOneLineErrorsNamingVariableAndValue) {
  struct Case {
    Vars vars;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {{{"RANK", "4"}, {"WORLD_SIZE", "4"}}, {"RANK='4'", "out of range", "WORLD_SIZE=4"}},
      {{{"RANK", "-1"}, {"WORLD_SIZE", "4"}}, {"RANK='-1'", "out of range"}},
      {{{"RANK", "abc"}, {"WORLD_SIZE", "4"}}, {"RANK='abc' is not an integer"}},
      {{{"RANK", "1x"}, {"WORLD_SIZE", "4"}}, {"RANK='1x' is not an integer"}},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, {"WORLD_SIZE='0' must be >= 1"}},
      {{{"RANK", "0"}, {"WORLD_SIZE", "99999999999"}}, {"WORLD_SIZE='99999999999' is not an integer"}},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "2"}}, {"LOCAL_RANK='2'", "out of range"}},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "-3"}}, {"LOCAL_RANK='-3'"}},
      {{{"RANK", "1"}}, {"RANK='1' is set but WORLD_SIZE is not"}},
      {{{"WORLD_SIZE", "2"}}, {"WORLD_SIZE='2' is set but RANK is not"}},
      {{{"MASTER_PORT", "70000"}}, {"MASTER_PORT='70000'", "1..65535"}},
      {{{"MASTER_PORT", "0"}}, {"MASTER_PORT='0'"}},
      {{{"MASTER_PORT", "http"}}, {"MASTER_PORT='http' is not an integer"}},
      {{{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "2"}}, {"SLURM_PROCID='2'", "SLURM_NTASKS=2"}},
      {{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_ID", "j"}}, {"SLURM_JOB_ID='j'"}},
      {{{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"}}, {"OMPI_COMM_WORLD_RANK='x'"}},
      {{{"OMPI_COMM_WORLD_RANK", "0"}}, {"OMPI_COMM_WORLD_RANK='0' is set but OMPI_COMM_WORLD_SIZE is not"}},
  };
  for (const auto& c : cases) {
    try {
      detect(c.vars);
      ADD_FAILURE() << "no error for " << c.parts[0];
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind("distributed environment: ", 0), 0u) << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
      for (const auto& p : c.parts) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
    }
  }
}

}  // namespace
}  // namespace ft
