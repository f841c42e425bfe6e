// The launcher runs /bin/sh scripts as its "ranks": each script reads the environment the launcher
// gave it and exits, fails, ignores SIGTERM or waits for a signal, as the case needs.
#include "train/dist/local_launcher.h"

#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "data/shard.h"
#include "tests/train/process_test_util.h"
#include "tests/train/train_test_util.h"
#include "train/cli/cli.h"
#include "train/dist/dist_env.h"

namespace ft {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

LaunchOptions sh(double grace_s = 10.0) {
  LaunchOptions o;
  o.exe = "/bin/sh";
  o.grace_s = grace_s;
  return o;
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

using test::parse_env;

TEST(LocalLauncher, EveryRankGetsItsEnvironmentAndAllZeroReturnsZero) {
  test::ScratchDir dir;
  ::setenv("CUDA_VISIBLE_DEVICES", "3,5", 1);  // passed through untouched
  ::setenv("RANK", "99", 1);                   // a stale value is replaced
  std::ostringstream log;
  const int rc = launch_local(3, {"-c", "env > " + dir.path() + "/env.$RANK; echo \"$0|$1\" > " + dir.path() + "/args.$RANK", "x", "y z"},
                              log, sh());
  ::unsetenv("CUDA_VISIBLE_DEVICES");
  ::unsetenv("RANK");
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(log.str(), "");
  std::string job, port;
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE(r);
    const auto env = parse_env(test::read_bytes(dir / str("env.", r)));
    EXPECT_EQ(env.at("RANK"), std::to_string(r));
    EXPECT_EQ(env.at("WORLD_SIZE"), "3");
    EXPECT_EQ(env.at("LOCAL_RANK"), std::to_string(r));
    EXPECT_EQ(env.at("MASTER_ADDR"), "127.0.0.1");
    EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "3,5");
    if (r == 0) {
      job = env.at("FLASHTRAIN_JOB_ID");
      port = env.at("MASTER_PORT");
    }
    EXPECT_EQ(env.at("FLASHTRAIN_JOB_ID"), job);  // one job, one port
    EXPECT_EQ(env.at("MASTER_PORT"), port);
    // What a rank makes of it.
    const DistEnv d = detect_dist_env([&](const char* name) -> const char* {
      const auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
    EXPECT_EQ(d.launcher, "flashtrain");
    EXPECT_EQ(d.rank, r);
    EXPECT_EQ(d.world_size, 3);
    EXPECT_EQ(d.job_id, job);
    EXPECT_GT(d.master_port, 0);
    EXPECT_EQ(test::read_bytes(dir / str("args.", r)), "x|y z\n");  // arguments pass through as given
  }
  EXPECT_EQ(job.rfind("flashtrain-local-", 0), 0u) << job;
}

TEST(LocalLauncher, FailingRankStopsTheOthersAndItsStatusIsReturned) {
  std::ostringstream log;
  const auto t0 = Clock::now();
  const int rc = launch_local(3, {"-c", "if [ \"$RANK\" = 1 ]; then sleep 0.2; exit 3; fi; exec sleep 30"}, log, sh(5.0));
  EXPECT_EQ(rc, 3);
  EXPECT_LT(since(t0), 3.0);  // the sleepers were stopped by SIGTERM, not waited for
  EXPECT_EQ(log.str(), "flashtrain: rank 1 exited with status 3; stopping the other ranks\n");
}

TEST(LocalLauncher, RankKilledBySignalIsNamed) {
  std::ostringstream log;
  const int rc = launch_local(2, {"-c", "if [ \"$RANK\" = 0 ]; then kill -KILL $$; fi; exec sleep 30"}, log, sh(5.0));
  EXPECT_EQ(rc, 128 + SIGKILL);
  EXPECT_EQ(log.str(), "flashtrain: rank 0 exited with signal SIGKILL; stopping the other ranks\n");
}

TEST(LocalLauncher, RankIgnoringSigtermIsKilledAfterTheGrace) {
  std::ostringstream log;
  const auto t0 = Clock::now();
  // Rank 1 ignores SIGTERM (an ignored signal stays ignored across exec).
  const int rc = launch_local(2, {"-c", "if [ \"$RANK\" = 0 ]; then sleep 0.2; exit 1; fi; trap '' TERM; exec sleep 30"}, log, sh(0.5));
  const double s = since(t0);
  EXPECT_EQ(rc, 1);
  EXPECT_GE(s, 0.2 + 0.5);
  EXPECT_LT(s, 3.0);
  expect_contains(log.str(), "flashtrain: rank 0 exited with status 1; stopping the other ranks\n");
  expect_contains(log.str(), "1 rank(s) still running 0.5 s after SIGTERM; sending SIGKILL");
}

TEST(LocalLauncher, SigtermToTheLauncherIsForwarded) {
  test::ScratchDir dir;
  std::ostringstream log;
  // Each rank records the SIGTERM it got and exits 0; the launcher still reports the interruption.
  const std::string script = "trap 'echo term > " + dir.path() + "/term.$RANK; exit 0' TERM; touch " + dir.path() +
                             "/up.$RANK; while :; do sleep 0.05; done";
  std::thread killer([&] {
    // Once both ranks are up (their trap is set), signal the launcher.
    const auto t0 = Clock::now();
    while (since(t0) < 5 && !(std::ifstream(dir / "up.0") && std::ifstream(dir / "up.1")))
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ::kill(::getpid(), SIGTERM);
  });
  const auto t0 = Clock::now();
  const int rc = launch_local(2, {"-c", script}, log, sh(5.0));
  killer.join();
  EXPECT_EQ(rc, 128 + SIGTERM);
  EXPECT_LT(since(t0), 4.0);
  EXPECT_EQ(test::read_bytes(dir / "term.0"), "term\n");
  EXPECT_EQ(test::read_bytes(dir / "term.1"), "term\n");
  expect_contains(log.str(), "flashtrain: got SIGTERM; passing it on to the ranks");
}

TEST(LocalLauncher, ExecFailureIsStatus127) {
  std::ostringstream log;
  LaunchOptions o;
  o.exe = "/nonexistent/flashtrain";
  const int rc = launch_local(2, {"train"}, log, o);
  EXPECT_EQ(rc, 127);
  expect_contains(log.str(), "exited with status 127");
}

TEST(LocalLauncher, BadNprocThrows) {
  std::ostringstream log;
  EXPECT_THROW(launch_local(0, {}, log, sh()), Error);
}

TEST(LocalLauncher, ChildArgumentsLoseOnlyNproc) {
  EXPECT_EQ(without_nproc({"c.yaml", "--nproc", "2", "--set", "lr=1", "--nproc=3", "--dry-run"}),
            (std::vector<std::string>{"c.yaml", "--set", "lr=1", "--dry-run"}));
  EXPECT_EQ(without_nproc({"c.yaml", "--", "--nproc", "2"}), (std::vector<std::string>{"c.yaml", "--", "--nproc", "2"}));
}

TEST(LocalLauncher, CliRejectsABadNproc) {
  for (const std::string bad : {"0", "-1", "two", "1.5", ""}) {
    std::istringstream in;
    std::ostringstream out, err;
    const int rc = cli_main({"train", "configs/tiny.yaml", "--nproc", bad}, in, out, err);
    EXPECT_EQ(rc, 2) << bad;
    expect_contains(err.str(), str("flashtrain: error: --nproc expects an integer >= 1, got '", bad, "'"));
    expect_contains(err.str(), "--nproc N");  // the usage shows the flag
  }
}

TEST(LocalLauncher, NprocInsideALaunchedJobIsAnError) {
  // A valid config, so the command gets as far as launching.
  test::ScratchDir dir;
  std::vector<int32_t> ids(4000);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i % 50257);
  write_shard(dir / "train_000000.bin", ids);
  write_shard(dir / "val_000000.bin", ids);
  test::write_text(dir / "c.yaml", "d_model: 64\nn_layers: 2\nn_heads: 4\nd_ff: 256\nmax_seq_len: 64\nblock_size: 64\n"
                                   "batch_size: 4\ntrain_data: " + dir.path() + "/train_*.bin\nval_data: " + dir.path() +
                                   "/val_*.bin\nout_dir: " + dir.path() + "/run\n");
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  std::istringstream in;
  std::ostringstream out, err;
  const int rc = cli_main({"train", dir / "c.yaml", "--nproc", "2"}, in, out, err);
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  EXPECT_EQ(rc, 1);
  expect_contains(err.str(), "flashtrain: error: --nproc 2 inside a job that torchrun launched already (rank 1 of 2");
}

}  // namespace
}  // namespace ft
