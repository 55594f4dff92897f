// Renders the HTML report in headless Chromium (Debian's `chromium`) to a PNG and checks
// that the page renders without console errors. A canary page that logs a console
// error proves the error detection works. Skipped when chromium is not installed.
// Every Chromium run is bounded by `timeout`.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "metrics/report/report_builder.h"
#include "metrics/report/report_renderer.h"
#include "tests/metrics/report/report_test_fixtures.h"

namespace bakeoff::metrics {
namespace {

namespace fs = std::filesystem;

const char* kChromium = "/usr/bin/chromium";

class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "bakeoff-html-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

struct RenderResult {
  int exit_code = -1;
  std::string log;
  std::uintmax_t png_bytes = 0;
  std::uint32_t width = 0, height = 0;
};

// Screenshots `html` at 1200x2000; the run is killed after 120 s.
RenderResult Render(const ScratchDir& dir, const std::string& name, const std::string& html) {
  fs::path page = dir / (name + ".html");
  fs::path png = dir / (name + ".png");
  fs::path log = dir / (name + ".log");
  fs::path profile = dir / (name + "-profile");
  fs::create_directories(profile);
  std::ofstream(page) << html;
  std::string command = std::string("timeout -k 5 120 ") + kChromium +
                        " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run"
                        " --disable-background-networking --disable-component-update --disable-sync"
                        " --user-data-dir=" + profile.string() + " --screenshot=" + png.string() +
                        " --window-size=1200,2000 --enable-logging=stderr --v=0 file://" +
                        page.string() + " > " + log.string() + " 2>&1";
  RenderResult result;
  int status = std::system(command.c_str());
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  result.log = text.str();
  std::error_code ec;
  if (fs::exists(png, ec)) {
    result.png_bytes = fs::file_size(png, ec);
    // PNG signature, then the IHDR chunk: width and height, big-endian, at 16 and 20.
    std::ifstream image(png, std::ios::binary);
    unsigned char header[24] = {};
    image.read(reinterpret_cast<char*>(header), sizeof header);
    if (header[1] == 'P' && header[2] == 'N' && header[3] == 'G') {
      auto be32 = [&](int at) {
        return (std::uint32_t(header[at]) << 24) | (std::uint32_t(header[at + 1]) << 16) |
               (std::uint32_t(header[at + 2]) << 8) | std::uint32_t(header[at + 3]);
      };
      result.width = be32(16);
      result.height = be32(20);
    }
  }
  return result;
}

// Console messages, page errors and failed loads, as Chromium logs them.
std::string ConsoleErrors(const std::string& log) {
  std::string errors;
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(":CONSOLE") != std::string::npos || line.find("net::ERR_") != std::string::npos) {
      errors += line + "\n";
    }
  }
  return errors;
}

Report SampleReport() {
  using testing::KeyOf;
  ReportInput input = testing::TwoByTwoSweep();
  testing::AddTrials(input, 3, 1.15);
  std::erase_if(input.trials, [](const TrialInput& t) { return t.variant_key == KeyOf("jit", "4"); });
  input.trials.push_back(testing::Unsuccessful(KeyOf("jit", "4"), 0, "oom", "out of memory"));
  for (TrialInput& t : input.trials) t.worker = t.repeat % 2 ? "node-b" : "node-a";
  ReportOptions options;
  options.memory_budget_bytes = 2'000'000'000;
  return BuildReport(input, options);
}

TEST(ReportHtmlRenderTest, RendersInHeadlessChromiumWithoutConsoleErrors) {
  if (::access(kChromium, X_OK) != 0) GTEST_SKIP() << kChromium << " is not installed";
  ScratchDir dir;

  // The canary: a page that logs an error must be caught by ConsoleErrors.
  RenderResult canary = Render(
      dir, "canary", "<!DOCTYPE html><html><body><p>canary</p><script>console.error('canary-error')"
                     "</script></body></html>");
  ASSERT_EQ(canary.exit_code, 0) << canary.log;
  ASSERT_NE(ConsoleErrors(canary.log).find("canary-error"), std::string::npos)
      << "Chromium's console log format changed; the check below would pass vacuously:\n"
      << canary.log;

  RenderResult report = Render(dir, "report", RenderReportHtml(SampleReport()));
  ASSERT_EQ(report.exit_code, 0) << report.log;
  EXPECT_EQ(ConsoleErrors(report.log), "");
  EXPECT_EQ(report.width, 1200u);
  EXPECT_EQ(report.height, 2000u);
  // Charts and tables make a far busier image than a near-blank page.
  EXPECT_GT(report.png_bytes, 50'000u);
  EXPECT_GT(report.png_bytes, 4 * canary.png_bytes);
}

}  // namespace
}  // namespace bakeoff::metrics
