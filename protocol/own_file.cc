#include "protocol/own_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace bakeoff::protocol {
namespace {

constexpr const char* kWhatToDo =
    "; remove it, or use a path in a directory only you can write (another user may have "
    "planted it there)";

Status NotALink(const std::string& path, std::string_view what) {
  return Status::InvalidArgument(std::string(what) + " '" + path +
                                 "' is a symbolic link: Bakeoff never opens its own files through one" + kWhatToDo);
}

// What is at `path`, as lstat or fstat gave it: Ok when it is a regular file of this user's.
Status CheckStat(const struct stat& st, const std::string& path, std::string_view what) {
  if (S_ISLNK(st.st_mode)) return NotALink(path, what);
  if (!S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(std::string(what) + " '" + path + "' is not a regular file" + kWhatToDo);
  }
  if (st.st_uid != geteuid()) {
    return Status::InvalidArgument(std::string(what) + " '" + path + "' belongs to uid " +
                                   std::to_string(st.st_uid) + ", not to this user (uid " +
                                   std::to_string(geteuid()) + "): its owner could read or change it" +
                                   kWhatToDo);
  }
  return Status::Ok();
}

}  // namespace

Result<int> OpenOwnFile(const std::string& path, int flags, std::string_view what) {
  // O_NONBLOCK: a FIFO planted under the name would otherwise block the open for good.
  const int fd = open(path.c_str(), flags | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
  if (fd < 0) {
    const int error = errno;
    if (error == ELOOP) return NotALink(path, what);
    return Status::IoError(std::string(what) + " '" + path + "': " + std::strerror(error));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    const int error = errno;
    close(fd);
    return Status::IoError(std::string(what) + " '" + path + "': " + std::strerror(error));
  }
  if (Status s = CheckStat(st, path, what); !s.ok()) {
    close(fd);
    return s;
  }
  (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

Status CheckOwnFileIfPresent(const std::string& path, std::string_view what) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return Status::IoError(std::string(what) + " '" + path + "': " + std::strerror(errno));
  }
  return CheckStat(st, path, what);
}

}  // namespace bakeoff::protocol
