// The loader on hand-built shards whose token values encode their position, so every window's
// contents are known without consulting the loader.
#include "data/loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>

#include "data/error.h"
#include "test_support.h"

namespace ft {
namespace {

// Shard 0 holds tokens 0..99, shard 1 holds 1000..1049, shard 2 holds 2000..2016.
struct ShardSet {
  test::TempDir dir;
  std::vector<std::string> paths;
  ShardSet() {
    const std::vector<std::pair<int32_t, int32_t>> spec = {{0, 100}, {1000, 50}, {2000, 17}};
    for (size_t s = 0; s < spec.size(); ++s) {
      std::vector<int32_t> ids;
      for (int32_t i = 0; i < spec[s].second; ++i) ids.push_back(spec[s].first + i);
      paths.push_back(dir.file("train_00000" + std::to_string(s) + ".bin"));
      write_shard(paths.back(), ids);
    }
  }
};

LoaderOptions options(const ShardSet& set, int64_t B, int64_t T, bool shuffle) {
  LoaderOptions o;
  o.inputs = set.paths;
  o.batch_size = B;
  o.seq_len = T;
  o.shuffle = shuffle;
  o.seed = 1234;
  return o;
}

// First token of each row.
std::vector<int32_t> row_starts(const Batch& b) {
  std::vector<int32_t> out;
  for (int64_t r = 0; r < b.B; ++r) out.push_back(b.tokens[r * (b.T + 1)]);
  return out;
}

TEST(Loader, SequentialWindowsFollowTheDocumentedLayout) {
  ShardSet set;
  // T = 8: shard 0 has (100-1)/8 = 12 windows starting 0, 8, ..., 88; shard 1 (50-1)/8 = 6 windows
  // starting 1000, ..., 1040; shard 2 (17-1)/8 = 2 windows at 2000, 2008. 20 windows, B = 3: 6 steps.
  Loader loader(options(set, 3, 8, false));
  EXPECT_EQ(loader.windows(), 20u);
  EXPECT_EQ(loader.steps_per_epoch(), 6u);
  const std::vector<std::vector<int32_t>> expected = {{0, 8, 16},   {24, 32, 40},       {48, 56, 64},
                                                      {72, 80, 88}, {1000, 1008, 1016}, {1024, 1032, 1040}};
  for (int step = 0; step < 6; ++step) {
    const Batch b = loader.next();
    EXPECT_EQ(b.position.epoch, 0u);
    EXPECT_EQ(b.position.step, static_cast<uint64_t>(step));
    ASSERT_EQ(row_starts(b), expected[step]) << "step " << step;
    for (int64_t r = 0; r < b.B; ++r) {
      for (int64_t t = 0; t <= b.T; ++t) EXPECT_EQ(b.tokens[r * 9 + t], expected[step][r] + t);
    }
  }
  // Windows 18, 19 (shard 2) do not fill a step: skipped, and the next epoch starts over.
  const Batch b = loader.next();
  EXPECT_EQ(b.position.epoch, 1u);
  EXPECT_EQ(b.position.step, 0u);
  EXPECT_EQ(row_starts(b), expected[0]);
}

TEST(Loader, ShuffledEpochsArePermutationsFixedBySeed) {
  ShardSet set;
  Loader a(options(set, 4, 8, true)), b(options(set, 4, 8, true));
  auto opt_c = options(set, 4, 8, true);
  opt_c.seed = 99;
  Loader c(opt_c);
  std::vector<std::vector<int32_t>> epochs(2);
  bool differs_from_other_seed = false;
  for (int e = 0; e < 2; ++e) {
    for (uint64_t s = 0; s < a.steps_per_epoch(); ++s) {
      const auto ra = row_starts(a.next());
      EXPECT_EQ(ra, row_starts(b.next()));
      differs_from_other_seed |= ra != row_starts(c.next());
      epochs[e].insert(epochs[e].end(), ra.begin(), ra.end());
    }
  }
  EXPECT_TRUE(differs_from_other_seed);
  EXPECT_NE(epochs[0], epochs[1]);
  for (const auto& ep : epochs) {  // 20 windows, 5 steps of 4: every window exactly once
    EXPECT_EQ(ep.size(), 20u);
    EXPECT_EQ(std::set<int32_t>(ep.begin(), ep.end()).size(), 20u);
    for (int32_t start : ep) EXPECT_TRUE(start % 8 == 0 || (start >= 1000 && (start - 1000) % 8 == 0));
  }
}

TEST(Loader, RanksAreDisjointAndTogetherEqualOneBigBatch) {
  ShardSet set;
  for (bool shuffle : {false, true}) {
    Loader whole(options(set, 4, 8, shuffle));
    std::vector<std::unique_ptr<Loader>> ranks;
    for (int r = 0; r < 2; ++r) {
      auto o = options(set, 2, 8, shuffle);
      o.rank = r;
      o.world_size = 2;
      ranks.push_back(std::make_unique<Loader>(o));
    }
    for (int step = 0; step < 7; ++step) {
      const auto big = row_starts(whole.next());
      auto joined = row_starts(ranks[0]->next());
      const auto second = row_starts(ranks[1]->next());
      joined.insert(joined.end(), second.begin(), second.end());
      EXPECT_EQ(joined, big) << "step " << step << " shuffle " << shuffle;
    }
  }
}

TEST(Loader, ResumeFromSavedPositionSeesTheSameBatches) {
  ShardSet set;
  for (bool prefetch : {true, false}) {
    auto o = options(set, 3, 8, true);
    o.prefetch = prefetch;
    Loader first(o);
    std::vector<std::vector<int32_t>> seen;
    std::string saved;
    for (int step = 0; step < 20; ++step) {
      if (step == 8) saved = first.position().to_string();
      seen.push_back(row_starts(first.next()));
    }
    Loader resumed(o);
    resumed.next();  // consume something first, so seek has a prefetched batch to discard
    resumed.seek(LoaderPosition::parse(saved));
    for (int step = 8; step < 20; ++step) EXPECT_EQ(row_starts(resumed.next()), seen[step]) << "step " << step;
  }
}

TEST(Loader, PositionRoundTripsAndRejectsOtherData) {
  ShardSet set;
  Loader a(options(set, 3, 8, true));
  a.next();
  const LoaderPosition p = a.position();
  EXPECT_EQ(LoaderPosition::parse(p.to_string()), p);
  EXPECT_THROW(LoaderPosition::parse("epoch=1 step=x"), DataError);
  Loader other(options(set, 2, 8, true));  // different B: different fingerprint
  EXPECT_THROW(other.seek(p), DataError);
  EXPECT_THROW(a.seek({0, 1000, 0}), DataError);
}

TEST(Loader, PrefetchAndSynchronousAgree) {
  ShardSet set;
  auto o = options(set, 2, 5, true);
  o.prefetch = false;
  Loader sync(o);
  Loader async(options(set, 2, 5, true));
  for (int step = 0; step < 40; ++step) {
    const Batch x = sync.next(), y = async.next();
    ASSERT_TRUE(std::equal(x.tokens, x.tokens + 2 * 6, y.tokens)) << "step " << step;
  }
}

TEST(Loader, UsesTheGivenAllocator) {
  ShardSet set;
  std::atomic<int> allocs{0}, frees{0};
  auto o = options(set, 2, 8, false);
  const HostAllocator base = HostAllocator::aligned_host();
  o.allocator = {[&](size_t n) {
                   ++allocs;
                   return base.allocate(n);
                 },
                 [&](void* p, size_t n) {
                   ++frees;
                   base.deallocate(p, n);
                 }};
  {
    Loader l(o);
    l.next();
    EXPECT_EQ(allocs.load(), 2);
  }
  EXPECT_EQ(frees.load(), 2);
}

TEST(Loader, ExpandsDirectoriesAndGlobs) {
  ShardSet set;
  write_shard(set.dir.file("val_000000.bin"), std::vector<int32_t>(50, 1));
  EXPECT_EQ(expand_shard_inputs({set.dir.path()}, "train"), set.paths);
  EXPECT_EQ(expand_shard_inputs({set.dir.path() + "/val_*.bin"}, "train"),
            std::vector<std::string>{set.dir.file("val_000000.bin")});
  EXPECT_THROW(expand_shard_inputs({set.dir.path() + "/nothing_*.bin"}, "train"), DataError);
  EXPECT_THROW(expand_shard_inputs({set.dir.path()}, "test"), DataError);
}

TEST(Loader, ReportsCorruptDataNamingTheFile) {
  test::TempDir dir;
  std::vector<int32_t> ids(64, 5);
  ids[40] = 60000;  // fits uint16, outside GPT-2's vocabulary
  write_shard(dir.file("train_000000.bin"), ids);
  LoaderOptions o;
  o.inputs = {dir.path()};
  o.batch_size = 1;
  o.seq_len = 8;
  o.shuffle = false;
  Loader l(o);
  for (int step = 0; step < 4; ++step) l.next();  // windows 0..3 cover tokens 0..32
  try {
    l.next();  // window 4: tokens 32..40
    FAIL() << "no exception";
  } catch (const DataError& e) {
    EXPECT_EQ(std::string(e.what()),
              dir.file("train_000000.bin") + ": token id 60000 at index 40 is out of range for vocab_size 50257");
  }
}

TEST(Loader, TooLittleDataIsAnError) {
  ShardSet set;
  try {
    Loader l(options(set, 64, 8, false));
    FAIL() << "no exception";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("fewer than one step"), std::string::npos) << e.what();
  }
  auto o = options(set, 2, 8, false);
  o.inputs.push_back(set.dir.file("missing.bin"));
  EXPECT_THROW(Loader l(o), DataError);
}

}  // namespace
}  // namespace ft
