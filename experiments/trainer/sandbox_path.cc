#include "experiments/trainer/sandbox_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "experiments/trainer/trainer_fields.h"

namespace bakeoff::trainer {
namespace {

std::vector<std::string> Components(const std::string& name) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t end = name.find('/', start);
    if (end == std::string::npos) end = name.size();
    parts.push_back(name.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

Status NotSandboxed(const std::string& name) {
  return Status::InvalidArgument("\"" + name + "\" is not a name inside the root (relative, no '..', " +
                                 "at most " + std::to_string(kMaxSandboxedNameBytes) + " bytes)");
}

}  // namespace

Result<std::string> ResolveForReading(const std::string& root, const std::string& name) {
  if (!IsSandboxedName(name)) return NotSandboxed(name);
  const std::string base = root.empty() ? "." : root;
  char real_root[PATH_MAX];
  if (realpath(base.c_str(), real_root) == nullptr) {
    return Status::NotFound("data root \"" + base + "\" does not exist: " + std::strerror(errno));
  }
  const std::string joined = std::string(real_root) + "/" + name;
  char real[PATH_MAX];
  if (realpath(joined.c_str(), real) == nullptr) {
    return Status::NotFound("no file \"" + name + "\" in the data root");
  }
  const std::string inside = std::string(real_root) == "/" ? "/" : std::string(real_root) + "/";
  if (std::string(real).rfind(inside, 0) != 0) {
    return Status::InvalidArgument("\"" + name + "\" leads out of the data root (a symbolic link); refused");
  }
  return std::string(real);
}

Result<int> OpenForWriting(const std::string& root, const std::string& name) {
  if (!IsSandboxedName(name)) return NotSandboxed(name);
  const std::string base = root.empty() ? "." : root;
  int dir = open(base.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return Status::NotFound("output directory \"" + base + "\": " + std::strerror(errno));
  const std::vector<std::string> parts = Components(name);
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    if (mkdirat(dir, parts[i].c_str(), 0755) != 0 && errno != EEXIST) {
      const int err = errno;
      close(dir);
      return Status::Unavailable("cannot create \"" + parts[i] + "\" in the output directory: " + std::strerror(err));
    }
    // O_NOFOLLOW: a directory component that is a link is refused, wherever it points.
    int next = openat(dir, parts[i].c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    const int err = errno;
    close(dir);
    if (next < 0) {
      return Status::InvalidArgument("\"" + name + "\": component \"" + parts[i] +
                                      "\" is not a plain directory inside the output directory (" +
                                      std::strerror(err) + ")");
    }
    dir = next;
  }
  int fd = openat(dir, parts.back().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  const int err = errno;
  close(dir);
  if (fd < 0) {
    return Status::InvalidArgument("cannot write \"" + name + "\" in the output directory (" +
                                    std::strerror(err) + (err == ELOOP ? ": it is a symbolic link" : "") + ")");
  }
  return fd;
}

}  // namespace bakeoff::trainer
