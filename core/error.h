// Errors are exceptions that name the op or file and show the offending values.
// Library code never aborts the process.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace ft {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Concatenates anything with an operator<<.
template <class... Args>
std::string str(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

}  // namespace ft

// Validates an argument at an op's front door. The message names the op, e.g.
// FT_CHECK_ARG(a.dim() == 2, "[matmul] expected a matrix, got shape ", a.shape());
#define FT_CHECK_ARG(cond, ...)                                  \
  do {                                                           \
    if (!(cond)) throw ::ft::Error(::ft::str(__VA_ARGS__));      \
  } while (0)

// An internal invariant; failing it is a bug in flashtrain, so the message carries file:line.
#define FT_ASSERT(cond, ...)                                                               \
  do {                                                                                     \
    if (!(cond))                                                                           \
      throw ::ft::Error(::ft::str("internal error at ", __FILE__, ":", __LINE__, ": ", #cond, \
                                  " ", ##__VA_ARGS__));                                    \
  } while (0)
