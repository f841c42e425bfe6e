#include "data/kjv.h"

#include <sys/wait.h>

#include <cstdio>

#include "data/error.h"

namespace ft {
namespace {

constexpr const char* kInstallHint = "install it with: apt-get install bible-kjv (or run scripts/prepare_kjv.sh)";

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

std::vector<KjvDocument> parse_kjv(const std::string& text, const std::string& source) {
  std::vector<KjvDocument> docs;
  size_t pos = 0, line_no = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    const std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (line.empty()) continue;
    // "<book><chapter>:<verse> <text>", book = optional leading digit then letters.
    size_t i = 0;
    if (is_digit(line[0])) ++i;
    const size_t letters = i;
    while (i < line.size() && ((line[i] >= 'A' && line[i] <= 'Z') || (line[i] >= 'a' && line[i] <= 'z'))) ++i;
    const size_t chapter_start = i;
    while (i < line.size() && is_digit(line[i])) ++i;
    const size_t colon = i;
    bool ok = i > letters && chapter_start > letters && colon > chapter_start && i < line.size() && line[i] == ':';
    if (ok) {
      ++i;
      const size_t verse_start = i;
      while (i < line.size() && is_digit(line[i])) ++i;
      ok = i > verse_start && i < line.size() && line[i] == ' ';
    }
    if (!ok) {
      throw DataError(source + ":" + std::to_string(line_no) +
                      ": not a \"<Book><chapter>:<verse> <text>\" line; has the bible-kjv output format changed?");
    }
    const std::string reference = line.substr(0, colon);
    if (docs.empty() || docs.back().reference != reference) docs.push_back({reference, std::string()});
    docs.back().text.append(line, i + 1, std::string::npos);
    docs.back().text.push_back('\n');
  }
  if (docs.empty()) throw DataError(source + ": printed no verses");
  return docs;
}

std::vector<KjvDocument> load_kjv(const std::string& bible_program) {
  const std::string command =
      "command -v " + bible_program + " >/dev/null 2>&1 && " + bible_program + " -f Gen1:1-Rev22:21 2>&1";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) throw DataError("[kjv] cannot start `" + bible_program + "`");
  std::string out;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = ::pclose(pipe);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    if (out.empty()) {
      throw DataError("[kjv] the `" + bible_program + "` program (Debian package bible-kjv) was not found; " +
                      kInstallHint);
    }
    const std::string first_line = out.substr(0, out.find('\n'));
    throw DataError("[kjv] `" + bible_program + " -f Gen1:1-Rev22:21` failed: " + first_line);
  }
  return parse_kjv(out, "`" + bible_program + " -f Gen1:1-Rev22:21`");
}

}  // namespace ft
