// The exception type of the data library: an ft::Error (core/error.h), so a front end that
// catches ft::Error sees data problems too.
//
// Every message is one line that names the file (or the command) and what is wrong with it, so a
// command-line front end can print e.what() and exit non-zero without adding context.
#pragma once

#include <string>

#include "core/error.h"

namespace ft {

class DataError : public Error {
 public:
  explicit DataError(const std::string& what) : Error(what) {}
};

}  // namespace ft
