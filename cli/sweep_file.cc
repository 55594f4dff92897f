#include "cli/sweep_file.h"

#include <fstream>
#include <sstream>

namespace bakeoff::cli {

Result<std::string> ReadSweepFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("cannot read the sweep file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace bakeoff::cli
