// Corpus preparation: text -> GPT-2 tokens -> train/val shards (data/shard.h).
//
// Documents: each input file is split at the literal "<|endoftext|>"; pieces that are empty or only
// ASCII whitespace are dropped. With corpus "kjv" the documents are the Bible's chapters
// (data/kjv.h). Each document is written as
// <|endoftext|> followed by its tokens (the llm.c / nanoGPT convention: the separator precedes
// every document, so the model always sees a document start after it).
//
// Split: document i (0-based, in input order) goes to val iff floor((i+1)*F) > floor(i*F) -- every
// 1/F-th document, spread evenly through the corpus, deterministic, no RNG. With F > 0 and fewer
// than 1/F documents that rule gives val none (a single text file without "<|endoftext|>" is one
// document), so the token stream is split instead: its last floor(F * tokens) tokens go to val,
// cut at a token boundary (usually inside a document), and the summary line says so.
//
// Output: DIR/train_000000.bin, train_000001.bin, ... (each at most shard_tokens tokens; a document
// may continue in the next shard) and DIR/val_000000.bin, ... Everything is written under temporary
// names and renamed only after the last shard is complete; on any error the temporary files are
// deleted and DIR is left as it was. Older train_*.bin / val_*.bin in DIR are removed when the new
// ones are published, so a loader pointed at DIR never mixes two preparations.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace ft {

struct PrepareOptions {
  std::vector<std::string> inputs;  // text files
  std::string corpus;               // "" or "kjv" (added to the inputs' documents)
  std::string out_dir;
  double val_fraction = 0.05;
  uint64_t shard_tokens = 100'000'000;  // llm.c's shard size
  std::string bpe_dir;                  // "" = default lookup (data/bpe_files.h)
  int threads = 0;                      // 0 = all hardware threads
  bool progress = true;                 // progress bar on the log stream
};

struct PrepareSummary {
  // With split_by_tokens (too few documents for val to get one: see Split above), the document
  // the cut goes through counts in both train_documents and val_documents.
  uint64_t documents = 0, train_documents = 0, val_documents = 0;
  bool split_by_tokens = false;
  uint64_t train_tokens = 0, val_tokens = 0;
  uint64_t bytes = 0;               // text bytes tokenised
  double seconds = 0;               // wall time of the whole preparation (vocabulary load included)
  double encode_seconds = 0;        // of which tokenising
  std::vector<std::string> shards;  // final paths, train first
};

// Throws DataError on bad options, unreadable inputs or write failures (nothing published then).
// Progress and the summary line go to `log` (nullptr: silent).
PrepareSummary prepare_corpus(const PrepareOptions& options, std::ostream* log);

// "prepared N documents (...) ..." -- the line printed at the end.
std::string format_summary(const PrepareSummary& s, const std::string& out_dir);

}  // namespace ft
