// Real ranks on 127.0.0.1 with an ephemeral port: threads, or forked processes where a rank must
// die. Known answers come from closed forms, never from the code under test.
#include "train/dist/rendezvous.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <future>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"

namespace ft {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

DistEnv env_for(int rank, int world, int port, const std::string& job = "test-job") {
  DistEnv e;
  e.rank = rank;
  e.world_size = world;
  e.local_rank = rank;
  e.master_addr = "127.0.0.1";
  e.master_port = port;
  e.job_id = job;
  e.launcher = "torchrun";
  return e;
}

struct RankResult {
  std::string error;  // "" when the rank's body completed
  double seconds = 0;
};

// Runs `ranks` of a job of `world` as threads; each builds its Rendezvous (logging to logs[rank])
// and runs body. Returns each rank's outcome, indexed like `ranks`.
std::vector<RankResult> run_job(int world, const std::vector<int>& ranks, int port, double timeout,
                                const std::function<void(Rendezvous&)>& body, std::vector<std::ostringstream>* logs = nullptr) {
  std::vector<RankResult> results(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      const auto t0 = Clock::now();
      try {
        std::ostringstream sink;
        Rendezvous rdzv(env_for(ranks[i], world, port), timeout, logs ? &(*logs)[static_cast<size_t>(ranks[i])] : &sink);
        body(rdzv);
      } catch (const std::exception& e) {
        results[i].error = e.what();
      }
      results[i].seconds = since(t0);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

std::vector<int> all_ranks(int world) {
  std::vector<int> r(static_cast<size_t>(world));
  for (int i = 0; i < world; ++i) r[static_cast<size_t>(i)] = i;
  return r;
}

void expect_contains(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

// ---- the wire format, written out independently of rendezvous.cpp ----

void put_u32(std::string& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b += static_cast<char>(v >> (8 * i));
}
void put_u64(std::string& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b += static_cast<char>(v >> (8 * i));
}

std::string hello_frame(const std::string& job, int rank, int world, const std::string& magic = "flashtrain-rendezvous",
                        uint32_t version = 1) {
  std::string payload = magic;
  put_u32(payload, version);
  put_u32(payload, static_cast<uint32_t>(rank));
  put_u32(payload, static_cast<uint32_t>(world));
  put_u32(payload, static_cast<uint32_t>(job.size()));
  payload += job;
  std::string f;
  put_u32(f, 1);  // hello
  put_u32(f, 0);
  put_u64(f, 0);
  put_u64(f, payload.size());
  return f + payload;
}

// Connects to 127.0.0.1:port, retrying while nobody listens (for up to 5 s); -1 on failure.
int connect_raw(int port) {
  const auto t0 = Clock::now();
  while (since(t0) < 5) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) return fd;
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return -1;
}

// Sends `bytes` (which may be an incomplete hello), then reads everything rank 0 sends until it
// closes the connection (at most 5 s). Returns the bytes read.
std::string intrude(int port, const std::string& bytes) {
  const int fd = connect_raw(port);
  if (fd < 0) return "<no connection>";
  if (!bytes.empty()) {
    EXPECT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
  }
  std::string got;
  const auto t0 = Clock::now();
  while (since(t0) < 5) {
    pollfd pf{fd, POLLIN, 0};
    if (::poll(&pf, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t k = ::recv(fd, buf, sizeof(buf), 0);
    if (k <= 0) break;
    got.append(buf, static_cast<size_t>(k));
  }
  ::close(fd);
  return got;
}

// The reason in a refusal frame (type 3), or "" when `reply` is not one.
std::string refusal_reason(const std::string& reply) {
  if (reply.size() < 24 || reply[0] != 3) return "";
  return reply.substr(24);
}

// ---- collectives against known answers ----

void check_collectives(Rendezvous& r, std::atomic<int>& arrived, std::vector<std::vector<double>>& reduced) {
  const int W = r.world_size(), me = r.rank();
  // broadcast: rank 0's bytes everywhere, whatever the others pass.
  std::vector<uint8_t> mine(1000);
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<uint8_t>(i * 31 + 7);
  const auto b = r.broadcast(me == 0 ? mine : std::vector<uint8_t>{9, 9});
  if (b != mine) throw Error("broadcast: wrong bytes");
  if (!r.broadcast({}).empty()) throw Error("empty broadcast: not empty");

  // all_gather: rank q contributes q+1 bytes of value 7q+1.
  const auto g = r.all_gather(std::vector<uint8_t>(static_cast<size_t>(me + 1), static_cast<uint8_t>(7 * me + 1)));
  if (static_cast<int>(g.size()) != W) throw Error(str("all_gather: ", g.size(), " parts"));
  for (int q = 0; q < W; ++q)
    if (g[static_cast<size_t>(q)] != std::vector<uint8_t>(static_cast<size_t>(q + 1), static_cast<uint8_t>(7 * q + 1)))
      throw Error(str("all_gather: part ", q, " is wrong"));
  // A large one: 200 kB per rank, more than a socket buffer holds.
  std::vector<uint8_t> big(200000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * (me + 3));
  const auto gb = r.all_gather(big);
  for (int q = 0; q < W; ++q) {
    const auto& p = gb[static_cast<size_t>(q)];
    if (p.size() != big.size()) throw Error("big all_gather: wrong size");
    for (size_t i = 0; i < p.size(); i += 997)
      if (p[i] != static_cast<uint8_t>(i * (q + 3))) throw Error(str("big all_gather: rank ", q, " byte ", i));
  }

  // float sum: v_r[i] = (r+1) i / 2 + r, so sum_r = i W(W+1)/4 + W(W-1)/2, exact in float here.
  std::vector<float> f(1000);
  for (size_t i = 0; i < f.size(); ++i) f[i] = (me + 1) * 0.5f * static_cast<float>(i) + static_cast<float>(me);
  r.all_reduce_sum(f.data(), f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    const double want = static_cast<double>(i) * W * (W + 1) / 4.0 + W * (W - 1) / 2.0;
    if (f[i] != want) throw Error(str("float all_reduce: [", i, "] = ", f[i], ", want ", want));
  }
  // 4 MiB of floats: v_r = r + 1, sum W(W+1)/2.
  std::vector<float> lf(1 << 20, static_cast<float>(me + 1));
  r.all_reduce_sum(lf.data(), lf.size());
  for (size_t i = 0; i < lf.size(); i += 4099)
    if (lf[i] != W * (W + 1) / 2.0f) throw Error(str("large float all_reduce: [", i, "] = ", lf[i]));
  r.all_reduce_sum(static_cast<float*>(nullptr), 0);

  // double sum: v_r[i] = 1/(r+1) + i/1000: the harmonic number H_W plus W i / 1000.
  std::vector<double> d(257);
  for (size_t i = 0; i < d.size(); ++i) d[i] = 1.0 / (me + 1) + static_cast<double>(i) / 1000;
  r.all_reduce_sum(d.data(), d.size());
  double h = 0;
  for (int q = 1; q <= W; ++q) h += 1.0 / q;
  for (size_t i = 0; i < d.size(); ++i)
    if (std::fabs(d[i] - (h + W * static_cast<double>(i) / 1000)) > 1e-12) throw Error(str("double all_reduce: [", i, "] = ", d[i]));
  reduced[static_cast<size_t>(me)] = d;

  // barrier: the last rank arrives late; nobody leaves before it arrived.
  if (me == W - 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  arrived.fetch_add(1);
  r.barrier();
  if (arrived.load() != W) throw Error(str("barrier: left with ", arrived.load(), " of ", W, " arrived"));

  // Many rounds keep the sequence numbers in step.
  for (int round = 0; round < 50; ++round) {
    double x = me + round;
    r.all_reduce_sum(&x, 1);
    if (x != W * (W - 1) / 2.0 + W * round) throw Error(str("round ", round, ": ", x));
  }
}

TEST(Rendezvous, CollectivesGiveKnownAnswersForWorlds1To4) {
  for (int world : {1, 2, 4}) {
    SCOPED_TRACE(str("world ", world));
    std::atomic<int> arrived{0};
    std::vector<std::vector<double>> reduced(static_cast<size_t>(world));
    const auto results =
        run_job(world, all_ranks(world), pick_free_port(), 10.0, [&](Rendezvous& r) { check_collectives(r, arrived, reduced); });
    for (size_t i = 0; i < results.size(); ++i) EXPECT_EQ(results[i].error, "") << "rank " << i;
    // Every rank holds the bit-identical sum.
    for (int q = 1; q < world; ++q)
      EXPECT_EQ(std::memcmp(reduced[0].data(), reduced[static_cast<size_t>(q)].data(), reduced[0].size() * sizeof(double)), 0);
  }
}

TEST(Rendezvous, IntrudersAreRefusedAndLoggedWhileTheJobCompletes) {
  const int port = pick_free_port();
  const double timeout = 6.0;  // the slow intruders are refused after timeout / 4 = 1.5 s
  std::vector<std::ostringstream> logs(3);
  std::atomic<int> arrived{0};
  std::vector<std::vector<double>> reduced(3);
  std::vector<RankResult> rank0;
  std::thread t0([&] {
    rank0 = run_job(3, {0}, port, timeout, [&](Rendezvous& r) { check_collectives(r, arrived, reduced); }, &logs);
  });

  struct Intruder {
    std::string bytes, reason_told, reason_logged;
    std::string reply = "";
  };
  std::string header_only;
  put_u32(header_only, 1);
  put_u32(header_only, 0);
  std::vector<Intruder> intruders = {
      {"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "", "not the flashtrain rendezvous protocol (first bytes \"GET / HTTP/1.1\\x0d\\x0a\")"},
      {hello_frame("test-job", 1, 3, "flashtrain-rendezvouz"), "", "wrong magic"},
      {hello_frame("test-job", 1, 3, "flashtrain-rendezvous", 2), "", "protocol version 2, this rank speaks 1"},
      {hello_frame("other-job", 1, 3), "job id 'other-job' is not this job's 'test-job'", ""},
      {hello_frame("test-job", 7, 3), "impossible rank 7 for world size 3", ""},
      {hello_frame("test-job", -1, 3), "impossible rank -1 for world size 3", ""},
      {hello_frame("test-job", 1, 2), "rank 1 says world size 2, this job has 3", ""},
      {header_only, "", "no complete hello within 1.5 s (8 bytes"},
      {"", "", "no complete hello within 1.5 s (0 bytes)"},
  };
  for (auto& in : intruders)
    if (in.reason_logged.empty()) in.reason_logged = in.reason_told;
  {
    std::vector<std::thread> ts;
    for (auto& in : intruders) ts.emplace_back([&] { in.reply = intrude(port, in.bytes); });
    for (auto& t : ts) t.join();
  }
  for (const auto& in : intruders) {
    SCOPED_TRACE(in.reason_logged);
    if (in.reason_told.empty()) {
      EXPECT_EQ(in.reply, "");  // closed without a word: it does not speak the protocol
    } else {
      EXPECT_EQ(refusal_reason(in.reply), in.reason_told);
    }
  }

  // The real rank 1 joins; a second "rank 1" is refused; then the real rank 2 completes the job.
  std::vector<RankResult> rank1, rank2;
  std::thread t1([&] { rank1 = run_job(3, {1}, port, timeout, [&](Rendezvous& r) { check_collectives(r, arrived, reduced); }); });
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  const std::string dup = intrude(port, hello_frame("test-job", 1, 3));
  expect_contains(refusal_reason(dup), "rank 1 has already joined (from 127.0.0.1:");
  std::thread t2([&] { rank2 = run_job(3, {2}, port, timeout, [&](Rendezvous& r) { check_collectives(r, arrived, reduced); }); });
  t0.join();
  t1.join();
  t2.join();
  EXPECT_EQ(rank0[0].error, "");
  EXPECT_EQ(rank1[0].error, "");
  EXPECT_EQ(rank2[0].error, "");

  // One line per refusal, naming the peer and the reason.
  const std::string log = logs[0].str();
  size_t lines = 0;
  for (char c : log) lines += c == '\n';
  EXPECT_EQ(lines, intruders.size() + 1) << log;
  std::istringstream lines_in(log);
  for (std::string line; std::getline(lines_in, line);) EXPECT_EQ(line.rfind("flashtrain: rendezvous: refused 127.0.0.1:", 0), 0u) << line;
  for (const auto& in : intruders) expect_contains(log, in.reason_logged);
  expect_contains(log, "rank 1 has already joined");
}

TEST(Rendezvous, MissingRankMakesEveryRankThrowNamingIt) {
  const double timeout = 1.0;
  const auto results = run_job(4, {0, 1, 2}, pick_free_port(), timeout, [](Rendezvous&) { ADD_FAILURE() << "joined"; });
  expect_contains(results[0].error, "rank 3 of 4 never arrived (joined: 0, 1, 2)");
  for (size_t i = 1; i < 3; ++i) {
    expect_contains(results[i].error, "rank 0 reports");
    expect_contains(results[i].error, "rank 3 of 4 never arrived");
  }
  for (const auto& r : results) {
    EXPECT_GE(r.seconds, timeout * 0.9);
    EXPECT_LT(r.seconds, timeout + 1.0);
  }

  const auto two_missing = run_job(4, {0, 2}, pick_free_port(), timeout, [](Rendezvous&) {});
  expect_contains(two_missing[0].error, "ranks 1, 3 of 4 never arrived (joined: 0, 2)");
  expect_contains(two_missing[1].error, "ranks 1, 3 of 4 never arrived");
}

TEST(Rendezvous, UnreachableRankZeroIsNamed) {
  const int port = pick_free_port();
  const auto results = run_job(2, {1}, port, 0.5, [](Rendezvous&) {});
  expect_contains(results[0].error, str("rank 0 at 127.0.0.1:", port, " was unreachable for 0.5 s"));
  EXPECT_LT(results[0].seconds, 1.5);
}

TEST(Rendezvous, MisconfiguredRealRankThrowsWithRankZerosReason) {
  const int port = pick_free_port();
  std::vector<RankResult> rank0, other;
  std::thread t0([&] { rank0 = run_job(2, {0}, port, 1.0, [](Rendezvous&) {}); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  try {
    std::ostringstream sink;
    Rendezvous r(env_for(1, 2, port, "yesterdays-job"), 1.0, &sink);
    ADD_FAILURE() << "joined";
  } catch (const Error& e) {
    expect_contains(e.what(), "refused this rank: job id 'yesterdays-job' is not this job's 'test-job'");
  }
  t0.join();
  expect_contains(rank0[0].error, "rank 1 of 2 never arrived");
}

TEST(Rendezvous, CollectiveTimeoutNamesTheSilentRank) {
  const double timeout = 0.5;
  const auto results = run_job(2, {0, 1}, pick_free_port(), timeout, [timeout](Rendezvous& r) {
    if (r.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // never calls the collective
      return;
    }
    const auto t0 = Clock::now();
    float x = 1;
    try {
      r.all_reduce_sum(&x, 1);
    } catch (const Error&) {
      EXPECT_GE(since(t0), timeout * 0.9);
      EXPECT_LT(since(t0), timeout + 0.5);
      try {
        r.barrier();
      } catch (const Error& e2) {
        expect_contains(e2.what(), "an earlier collective failed");
      }
      throw;
    }
  });
  expect_contains(results[0].error, "all_reduce_sum(float) #0: rank 1 (127.0.0.1:");
  expect_contains(results[0].error, "did not answer within 0.5 s");
}

TEST(Rendezvous, MismatchedCollectivesThrowOnBothSides) {
  auto kinds = run_job(2, {0, 1}, pick_free_port(), 2.0, [](Rendezvous& r) {
    if (r.rank() == 0) {
      r.barrier();
    } else {
      float x[3] = {};
      r.all_reduce_sum(x, 3);
    }
  });
  expect_contains(kinds[0].error, "collective mismatch: this rank called barrier #0, rank 1 (127.0.0.1:");
  expect_contains(kinds[0].error, "sent all_reduce_sum(float) #0");
  expect_contains(kinds[1].error, "rank 0 aborted the job: ");
  expect_contains(kinds[1].error, "collective mismatch");
  EXPECT_LT(kinds[1].seconds, 1.5);  // told, not timed out

  auto counts = run_job(2, {0, 1}, pick_free_port(), 2.0, [](Rendezvous& r) {
    std::vector<double> x(static_cast<size_t>(4 + r.rank()));
    r.all_reduce_sum(x.data(), x.size());
  });
  expect_contains(counts[0].error, "rank 1 sent 5 values, rank 0 has 4");
  expect_contains(counts[1].error, "rank 1 sent 5 values, rank 0 has 4");
}

TEST(Rendezvous, CollectivesAfterShutdownThrowAndWorldOneNeedsNoSockets) {
  Rendezvous solo(env_for(0, 1, 1), 1.0);
  EXPECT_EQ(solo.broadcast({1, 2}), (std::vector<uint8_t>{1, 2}));
  float x = 3;
  solo.all_reduce_sum(&x, 1);
  EXPECT_EQ(x, 3);
  solo.start_watchdog([](const std::string& why) { ADD_FAILURE() << why; });
  solo.shutdown();
  solo.shutdown();
  try {
    solo.barrier();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    expect_contains(e.what(), "barrier #2 after shutdown()");
  }
}

// Every rank watches; they shut down in the given order, `gap` apart; nobody may report a failure.
void clean_shutdown_round(const std::vector<int>& order, bool broadcast_last) {
  const int world = static_cast<int>(order.size());
  std::atomic<int> failures{0};
  std::atomic<int> turn{0};
  std::string failure_text;
  std::mutex mu;
  const auto results = run_job(world, all_ranks(world), pick_free_port(), 5.0, [&](Rendezvous& r) {
    r.start_watchdog([&](const std::string& why) {
      failures.fetch_add(1);
      std::lock_guard<std::mutex> lock(mu);
      failure_text += why + "; ";
    });
    r.barrier();
    if (broadcast_last) {
      // Rank 0 sends and leaves at once; the others read the bytes after rank 0 has gone.
      if (r.rank() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (r.broadcast({42}) != std::vector<uint8_t>{42}) throw Error("broadcast after rank 0 left: wrong bytes");
    }
    const auto t0 = Clock::now();  // bounded, so a failed rank cannot hang the others
    while (turn.load() < world && order[static_cast<size_t>(turn.load())] != r.rank() && since(t0) < 5)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    r.shutdown();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // give the others' watchdogs time to look
    turn.fetch_add(1);
  });
  for (const auto& res : results) EXPECT_EQ(res.error, "");
  EXPECT_EQ(failures.load(), 0) << failure_text;
}

TEST(Rendezvous, CleanShutdownIsNotReportedAsAFailure) {
  for (int rep = 0; rep < 3; ++rep) {
    clean_shutdown_round({1, 2, 0}, false);
    clean_shutdown_round({0, 1, 2}, false);
    clean_shutdown_round({0, 1}, true);
  }
}

// A child process running one rank: body(rdzv, report) writes what it observed to `report`.
// Returns the child's pid; its report comes back through *read_fd.
pid_t fork_rank(int rank, int world, int port, double timeout, const std::function<void(Rendezvous&, std::string&)>& body,
                int* read_fd) {
  int p[2];
  if (::pipe(p) != 0) throw Error("pipe");
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    std::string report;
    try {
      std::ostringstream sink;
      Rendezvous r(env_for(rank, world, port), timeout, &sink);
      body(r, report);
    } catch (const std::exception& e) {
      report += str("error: ", e.what());
    }
    [[maybe_unused]] const ssize_t k = ::write(p[1], report.data(), report.size());
    ::_exit(0);  // no destructors, no goodbye from anything still open
  }
  ::close(p[1]);
  *read_fd = p[0];
  return pid;
}

std::string read_all(int fd) {
  std::string s;
  char buf[1024];
  ssize_t k;
  while ((k = ::read(fd, buf, sizeof(buf))) > 0) s.append(buf, static_cast<size_t>(k));
  ::close(fd);
  return s;
}

TEST(Rendezvous, DeadRankFiresTheWatchdogAndFailsCollectives) {
  const int port = pick_free_port();
  const double timeout = 5.0;
  int fd1 = -1, fd2 = -1;
  // Rank 2 joins, passes one barrier and dies (_exit: no goodbye).
  const pid_t dying = fork_rank(2, 3, port, timeout, [](Rendezvous& r, std::string&) { r.barrier(); ::_exit(0); }, &fd2);
  // Rank 1 survives; its next collective must fail naming rank 2.
  const pid_t survivor = fork_rank(1, 3, port, timeout, [](Rendezvous& r, std::string& report) {
    r.barrier();
    const auto t0 = Clock::now();
    try {
      r.barrier();
      report += "second barrier passed";
    } catch (const Error& e) {
      report += str("collective failed after ", since(t0), " s: ", e.what());
    }
    r.shutdown();
  }, &fd1);

  std::ostringstream sink;
  Rendezvous r(env_for(0, 3, port), timeout, &sink);
  std::promise<std::pair<std::string, Clock::time_point>> fired;
  std::atomic<int> calls{0};
  r.start_watchdog([&](const std::string& why) {
    if (calls.fetch_add(1) == 0) fired.set_value({why, Clock::now()});
  });
  r.barrier();
  const auto after_barrier = Clock::now();
  auto fut = fired.get_future();
  ASSERT_EQ(fut.wait_for(std::chrono::duration<double>(timeout)), std::future_status::ready) << "the watchdog never fired";
  const auto [why, when] = fut.get();
  expect_contains(why, "rank 2 (127.0.0.1:");
  expect_contains(why, ") disconnected");
  EXPECT_LT(std::chrono::duration<double>(when - after_barrier).count(), 2.0);
  try {
    r.barrier();
    ADD_FAILURE() << "barrier with a dead rank passed";
  } catch (const Error& e) {
    expect_contains(e.what(), "rank 2 (127.0.0.1:");
    expect_contains(e.what(), "hung up");
  }
  r.shutdown();
  const std::string report1 = read_all(fd1);
  read_all(fd2);
  ::waitpid(dying, nullptr, 0);
  ::waitpid(survivor, nullptr, 0);
  expect_contains(report1, "collective failed after ");
  expect_contains(report1, "rank 2 (127.0.0.1:");
  EXPECT_EQ(calls.load(), 1);
}

TEST(Rendezvous, DeadRankZeroFiresThePeersWatchdog) {
  const int port = pick_free_port();
  const double timeout = 5.0;
  int fd0 = -1;
  const pid_t dying = fork_rank(0, 2, port, timeout, [](Rendezvous& r, std::string&) { r.barrier(); ::_exit(0); }, &fd0);
  std::ostringstream sink;
  Rendezvous r(env_for(1, 2, port), timeout, &sink);
  std::promise<std::string> fired;
  r.start_watchdog([&](const std::string& why) { fired.set_value(why); });
  r.barrier();
  auto fut = fired.get_future();
  ASSERT_EQ(fut.wait_for(std::chrono::seconds(2)), std::future_status::ready) << "the watchdog never fired";
  EXPECT_EQ(fut.get(), "rank 0 disconnected");
  try {
    double x = 1;
    r.all_reduce_sum(&x, 1);
    ADD_FAILURE() << "all_reduce without rank 0 passed";
  } catch (const Error& e) {
    expect_contains(e.what(), str("rank 0 (127.0.0.1:", port, ")"));
  }
  r.shutdown();
  read_all(fd0);
  ::waitpid(dying, nullptr, 0);
}

}  // namespace
}  // namespace ft
