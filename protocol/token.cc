#include "protocol/token.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace bakeoff::protocol {
namespace {

std::string Trim(const std::string& s) {
  const char* ws = " \t\r\n";
  auto begin = s.find_first_not_of(ws);
  if (begin == std::string::npos) return "";
  auto end = s.find_last_not_of(ws);
  return s.substr(begin, end - begin + 1);
}

}  // namespace

Result<std::string> LoadToken(const std::string& token_file) {
  if (!token_file.empty()) {
    std::ifstream in(token_file);
    if (!in) {
      return Status::IoError("cannot read the token file '" + token_file +
                             "': check the path and its permissions");
    }
    std::stringstream buffer;
    buffer << in.rdbuf();
    std::string token = Trim(buffer.str());
    if (token.empty()) {
      return Status::InvalidArgument("the token file '" + token_file +
                                     "' is empty: write the shared token into it");
    }
    return token;
  }
  if (const char* env = std::getenv(kTokenEnvVar)) return Trim(env);
  return std::string();
}

bool TokensEqual(std::string_view expected, std::string_view given) {
  // Compare every byte of `expected` whatever the input, folding the length mismatch in.
  unsigned char diff = expected.size() == given.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= static_cast<unsigned char>(expected[i]) ^ g;
  }
  return diff == 0;
}

}  // namespace bakeoff::protocol
