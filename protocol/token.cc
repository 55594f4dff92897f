#include "protocol/token.h"

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include <openssl/sha.h>

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

Result<std::vector<std::string>> LoadTokenList(const std::string& token_file) {
  std::ifstream in(token_file);
  if (!in) {
    return Status::IoError("cannot read the token file '" + token_file +
                           "': check the path and its permissions");
  }
  std::vector<std::string> tokens;
  std::string line;
  while (std::getline(in, line)) {
    line = Trim(line);
    if (!line.empty() && line[0] != '#') tokens.push_back(line);
  }
  if (tokens.empty()) {
    return Status::InvalidArgument("the token file '" + token_file +
                                   "' holds no token: write the token into it, one per line");
  }
  return tokens;
}

Result<std::string> LoadToken(const std::string& token_file) {
  if (!token_file.empty()) {
    auto tokens = LoadTokenList(token_file);
    if (!tokens.ok()) return tokens.status();
    return tokens->front();
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

bool TokenInList(const std::vector<std::string>& accepted, std::string_view given) {
  bool found = false;
  for (const auto& token : accepted) found |= TokensEqual(token, given);
  return found;
}

std::string RandomToken(std::size_t bytes) {
  std::random_device source;  // /dev/urandom on Linux
  const char* hex = "0123456789abcdef";
  std::string token;
  for (std::size_t i = 0; i < bytes; ++i) {
    const unsigned byte = source() & 0xff;
    token.push_back(hex[byte >> 4]);
    token.push_back(hex[byte & 0xf]);
  }
  return token;
}

std::string Sha256Hex(std::string_view text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char byte : digest) {
    out.push_back(hex[byte >> 4]);
    out.push_back(hex[byte & 0xf]);
  }
  return out;
}

}  // namespace bakeoff::protocol
