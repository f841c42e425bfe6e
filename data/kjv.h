// The built-in corpus: the King James Bible from Debian's bible-kjv package.
//
// `bible -f Gen1:1-Rev22:21` prints one verse per line as "<Book><chapter>:<verse> <text>"
// (e.g. "Ge1:1 In the beginning God created the heaven and the earth."; 31102 verses, 4.4 MB,
// ASCII). Each chapter (1189 of them) becomes one document: its verses' text, reference stripped,
// one verse per line. Chapters rather than books because most chapters fit a 1024-token context and
// give the validation split many small, evenly spread pieces instead of a few whole books.
#pragma once

#include <string>
#include <vector>

namespace ft {

struct KjvDocument {
  std::string reference;  // "Ge1", "1Sm17", ... (the package's book abbreviation + chapter)
  std::string text;       // verses, each ending in '\n'
};

// Runs the `bible` program. Throws DataError when it is missing ("... apt-get install bible-kjv")
// or prints something that does not parse as above.
std::vector<KjvDocument> load_kjv(const std::string& bible_program = "bible");

// Parses the output of `bible -f ...` (exposed for tests). `source` names it in error messages.
std::vector<KjvDocument> parse_kjv(const std::string& text, const std::string& source);

}  // namespace ft
