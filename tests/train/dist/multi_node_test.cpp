// Two hosts' worth of ranks on one host (issue 20, item 3): two launchers, each told it is one
// "node" of two by torchrun's variables (NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT), start
// their ranks, and the ranks of both meet at one rendezvous as one job. First with /bin/sh ranks
// that report the environment they got, then end to end: `flashtrain train CONFIG --nproc 2` on
// each of two nodes against `--nproc 4` on one, CPU ranks, the same losses bit for bit (the same
// four ranks, the same rank-ordered sums). On GPUs the same launch runs NCCL across the nodes.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "tests/train/process_test_util.h"
#include "tests/train/train_test_util.h"
#include "tests/train/trainer_test_util.h"
#include "train/config/config.h"
#include "train/config/json.h"
#include "train/dist/dist_env.h"
#include "train/dist/local_launcher.h"
#include "train/dist/rendezvous.h"

namespace ft {
namespace {

namespace fs = std::filesystem;

using test::flashtrain_binary;
using test::parse_env;
using test::wait_for_exit;
using test::getenv_of;

TEST(MultiNode, NodeOptionsComeFromTorchrunsVariables) {
  const std::map<std::string, std::string> none;
  const LaunchOptions one = node_launch_options(getenv_of(none));
  EXPECT_EQ(one.nnodes, 1);
  EXPECT_EQ(one.master_port, 0) << "one node picks its own port";
  const std::map<std::string, std::string> two{
      {"NNODES", "2"}, {"NODE_RANK", "1"}, {"MASTER_ADDR", "10.0.0.7"}, {"MASTER_PORT", "29400"}};
  const LaunchOptions o = node_launch_options(getenv_of(two));
  EXPECT_EQ(o.nnodes, 2);
  EXPECT_EQ(o.node_rank, 1);
  EXPECT_EQ(o.master_addr, "10.0.0.7");
  EXPECT_EQ(o.master_port, 29400);
  auto error_of = [](const std::map<std::string, std::string>& m) {
    try {
      node_launch_options(getenv_of(m));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of({{"NNODES", "2"}, {"NODE_RANK", "2"}}).find("NODE_RANK=2 must be below NNODES=2"), std::string::npos);
  EXPECT_NE(error_of({{"NNODES", "2"}, {"NODE_RANK", "0"}}).find("needs MASTER_ADDR and MASTER_PORT"), std::string::npos);
  EXPECT_NE(error_of({{"NNODES", "two"}}).find("NNODES='two' is not an integer"), std::string::npos);
  EXPECT_NE(error_of({{"NNODES", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}).find("MASTER_PORT='70000'"),
            std::string::npos);
}

TEST(MultiNode, TwoLaunchersGiveTheirRanksOneJobOfGlobalRanks) {
  test::ScratchDir dir;
  const int port = pick_free_port();
  std::vector<pid_t> nodes;
  std::fflush(nullptr);
  for (int node = 0; node < 2; ++node) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      LaunchOptions o;
      o.exe = "/bin/sh";
      o.nnodes = 2;
      o.node_rank = node;
      o.master_port = port;
      std::ostringstream log;
      int rc = 1;
      try {
        rc = launch_local(2, {"-c", "env > " + dir.path() + "/env.$RANK"}, log, o);
      } catch (...) {
      }
      std::_Exit(rc);
    }
    nodes.push_back(pid);
  }
  for (pid_t p : nodes) EXPECT_EQ(wait_for_exit(p, 30), 0);
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE(r);
    const auto env = parse_env(test::read_bytes(dir / str("env.", r)));
    const DistEnv d = detect_dist_env(getenv_of(env));
    EXPECT_EQ(d.rank, r);
    EXPECT_EQ(d.world_size, 4);
    EXPECT_EQ(d.local_rank, r % 2) << "local ranks restart on every node";
    EXPECT_EQ(d.master_port, port);
    EXPECT_EQ(d.master_addr, "127.0.0.1");
    EXPECT_EQ(d.job_id, str("flashtrain-nodes@127.0.0.1:", port)) << "both nodes derive the same job id";
    EXPECT_EQ(env.count("NNODES"), 0u) << "a rank must not take itself for a launcher";
  }
}

// ---- end to end: flashtrain's own launcher on two "nodes", CPU ranks ----

// flashtrain with stdout in `log`, stderr in `log`.err.
pid_t spawn(const std::vector<std::string>& args, const std::map<std::string, std::string>& env, const std::string& log) {
  return test::spawn_flashtrain(args, env, log, log + ".err");
}

std::vector<double> losses_of(const std::string& out_dir) {
  std::vector<double> out;
  std::ifstream f(out_dir + "/metrics.jsonl");
  for (std::string line; std::getline(f, line);) {
    const Json j = Json::parse(line);
    if (j.find("loss")) out.push_back(j.at("loss").as_double());
  }
  return out;
}

TEST(MultiNode, TwoNodesOfTwoCpuRanksTrainLikeFourRanksOnOneNode) {
  if (!fs::exists(flashtrain_binary())) GTEST_SKIP() << "needs the flashtrain binary at " << flashtrain_binary();
  test::ScratchDir dir;
  TrainConfig c = test::synthetic_config(dir.path());
  c.batch_size = 2;  // per rank: 8 sequences a step over 4 ranks
  c.max_steps = 4;
  c.log_interval = 1;
  c.dist_timeout_s = 30;
  c.allreduce_bucket_mb = 0.01;
  c.checkpoint_interval = 0;
  c.out_dir = dir.path() + "/one_node";
  const std::string one_yaml = dir.path() + "/one.yaml";
  std::ofstream(one_yaml) << config_to_yaml(c);
  c.out_dir = dir.path() + "/two_nodes";
  const std::string two_yaml = dir.path() + "/two.yaml";
  std::ofstream(two_yaml) << config_to_yaml(c);

  const pid_t ref = spawn({"train", one_yaml, "--nproc", "4"}, {}, dir.path() + "/one.log");
  ASSERT_EQ(wait_for_exit(ref, 120), 0) << test::read_bytes(dir / "one.log.err");

  const std::string port = std::to_string(pick_free_port());
  std::vector<pid_t> nodes;
  for (int node = 0; node < 2; ++node)
    nodes.push_back(spawn({"train", two_yaml, "--nproc", "2"},
                          {{"NNODES", "2"}, {"NODE_RANK", std::to_string(node)}, {"MASTER_ADDR", "127.0.0.1"},
                           {"MASTER_PORT", port}},
                          dir.path() + str("/node", node, ".log")));
  for (int node = 0; node < 2; ++node)
    EXPECT_EQ(wait_for_exit(nodes[node], 120), 0) << test::read_bytes(dir / str("node", node, ".log.err"));
  EXPECT_NE(test::read_bytes(dir / "node0.log").find("data parallel: 4 ranks (cpu)"), std::string::npos)
      << test::read_bytes(dir / "node0.log");
  EXPECT_EQ(test::read_bytes(dir / "node1.log").find("flashtrain: GPT-2"), std::string::npos)
      << "global rank 0 alone prints, and it is on node 0";
  const std::vector<double> a = losses_of(dir.path() + "/one_node"), b = losses_of(dir.path() + "/two_nodes");
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(b, a) << "the same 4 ranks, the same data slices and sums";
}

}  // namespace
}  // namespace ft
