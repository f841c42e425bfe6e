// A reader for flat JSON objects of string keys and integer values -- the shape of GPT-2's
// encoder.json ({"!": 0, "\u0120the": 262, ...}). It handles every JSON string escape, including
// \uXXXX surrogate pairs, and nothing else: nested values, floats or booleans are errors.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ft {

// Parses `text`; keys come back as UTF-8 in file order. Throws DataError naming `filename` and the
// byte offset of the first problem.
std::vector<std::pair<std::string, int64_t>> parse_flat_json_object(std::string_view text, const std::string& filename);

}  // namespace ft
