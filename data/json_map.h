// A reader for flat JSON objects of string keys and integer values -- the shape of GPT-2's
// encoder.json ({"!": 0, "\u0120the": 262, ...}), read with nlohmann/json's parser (every string
// escape, \uXXXX surrogate pairs, UTF-8 checked). Anything but integer values -- nested values,
// floats, strings, booleans, null -- is an error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ft {

// Parses `text`; keys come back as UTF-8 in file order. Throws DataError naming `filename`, and
// for a syntax error the byte offset of the problem.
std::vector<std::pair<std::string, int64_t>> parse_flat_json_object(std::string_view text, const std::string& filename);

}  // namespace ft
