#include "data/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>

#include "data/error.h"

namespace ft {
namespace {

constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+)"
                                     R"(|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+)";

// Each thread owns one match-data block and one JIT stack. They are tied to the pattern only
// through its capture count, which is the same for every Pretokenizer, so one set serves all.
struct ThreadMatchState {
  pcre2_match_data* match = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;

  ThreadMatchState() {
    match = pcre2_match_data_create(1, nullptr);
    // The default JIT stack (32 KiB on the machine stack) is enough for this pattern on the inputs
    // we tried, but a run of millions of spaces backtracks through \s+(?!\S); 1 MiB growing to
    // 64 MiB removes the question.
    stack = pcre2_jit_stack_create(1 << 20, 64 << 20, nullptr);
    context = pcre2_match_context_create(nullptr);
    if (!match || !stack || !context) throw DataError("[pretokenize] out of memory creating PCRE2 match state");
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~ThreadMatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(match);
  }
};

ThreadMatchState& thread_state() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

struct Pretokenizer::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() { pcre2_code_free(code); }
};

Pretokenizer::Pretokenizer() : impl_(std::make_unique<Impl>()) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kGpt2Pattern), PCRE2_ZERO_TERMINATED,
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &err_offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    throw DataError(std::string("[pretokenize] PCRE2 rejected the GPT-2 pattern at offset ") +
                    std::to_string(err_offset) + ": " + reinterpret_cast<const char*>(msg));
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

Pretokenizer::~Pretokenizer() = default;
Pretokenizer::Pretokenizer(Pretokenizer&&) noexcept = default;
Pretokenizer& Pretokenizer::operator=(Pretokenizer&&) noexcept = default;

bool Pretokenizer::jit() const { return impl_->jit; }

bool Pretokenizer::next_match(std::string_view text, size_t start, size_t* begin, size_t* end) const {
  ThreadMatchState& st = thread_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const int rc = impl_->jit ? pcre2_jit_match(impl_->code, subject, text.size(), start, 0, st.match, st.context)
                            : pcre2_match(impl_->code, subject, text.size(), start, 0, st.match, st.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof(msg));
    throw DataError(std::string("[pretokenize] PCRE2 match failed at byte ") + std::to_string(start) + ": " +
                    reinterpret_cast<const char*>(msg));
  }
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.match);
  *begin = ov[0];
  *end = ov[1];
  return true;
}

}  // namespace ft
