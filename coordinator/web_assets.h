// The coordinator's web page (coordinator/web/: index.html, app.js, app.css) and its API
// description (openapi.json), built into the binary by cmake/EmbedFiles.cmake: the page
// needs no files at run time, no CDN and no network. Served by HttpServer at /,
// /ui/app.js, /ui/app.css and /api/v1/openapi.json.
// Thread-safety: read-only after first use.
#pragma once

#include <string_view>
#include <vector>

namespace bakeoff::coordinator {

struct EmbeddedFile {
  std::string_view name;  // its name in coordinator/web/, e.g. "app.js"
  std::string_view body;
};

// Every file of coordinator/web/ (generated).
const std::vector<EmbeddedFile>& EmbeddedFiles();

// The file named `name`, or nullptr.
inline const EmbeddedFile* FindEmbeddedFile(std::string_view name) {
  for (const auto& f : EmbeddedFiles()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace bakeoff::coordinator
