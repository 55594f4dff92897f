// Issue 47: docs/your-script.md, followed literally. A fresh virtual environment gets
// the reporting library by pip (offline, from ./experiments/python) and the project's
// requirements (PyTorch, transformers, PEFT, ...) through a .pth file naming links to
// the project environment's packages (the guide's last section says why: no wheel of
// them is there offline); three scripts that no other test runs (an HF Trainer + PEFT
// with the default callback, a loop reading --compile with argparse, one reading
// TORCH_COMPILE) each run the guide's sweep, read from the guide itself, through
// `bakeoff local --workers 1` with that venv first on PATH; each report compares
// compile against eager with tokens/s on both sides and a cold and a warm compile.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/integration/process_guard.h"
#include "tests/integration/test_files.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
using nlohmann::json;
namespace fs = std::filesystem;

const std::string kBin = BAKEOFF_BINARY_DIR;
const std::string kSource = BAKEOFF_SOURCE_DIR;
const fs::path kProjectVenv = "/opt/bakeoff/venv";

// The YAML block that follows `<!-- your-script-test: NAME -->` in docs/your-script.md.
std::string GuideSweep(const std::string& name) {
  const std::string guide = testing::ReadFile(kSource + "/docs/your-script.md");
  const std::string marker = "<!-- your-script-test: " + name + " -->";
  const auto at = guide.find(marker);
  if (at == std::string::npos) return "";
  const auto open = guide.find("```yaml\n", at);
  const auto close = guide.find("```", open + 8);
  if (open == std::string::npos || close == std::string::npos) return "";
  return guide.substr(open + 8, close - open - 8);
}

// The project environment's site-packages, or "" without one.
fs::path ProjectSitePackages() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(kProjectVenv / "lib", ec)) {
    const fs::path site = entry.path() / "site-packages";
    if (fs::exists(site / "torch", ec)) return site;
  }
  return "";
}

class YourScriptGuideTest : public ::testing::Test {
 protected:
  void SetUp() override {
    site_ = ProjectSitePackages();
    if (site_.empty()) GTEST_SKIP() << "no project environment at " << kProjectVenv << " (scripts/setup makes it)";
    dir_ = testing::FreshTestDir("bakeoff-guide");
  }
  void TearDown() override {
    if (!HasFailure() && !dir_.empty()) fs::remove_all(dir_);
  }

  // Runs argv to its end within `limit`, its output in dir_/log; its exit code or -1.
  int Run(const std::vector<std::string>& argv, const std::string& log, std::chrono::seconds limit,
          const std::vector<std::string>& env = {}) {
    testing::ProcessGuard process(argv, env, (dir_ / log).string());
    auto code = process.WaitExit(limit);
    return code.value_or(-1);
  }

  // Step 1: `python3 -m venv`, the requirements, `pip install ./experiments/python`.
  void MakeTheVenv() {
    venv_ = dir_ / "venv";
    ASSERT_EQ(Run({"/usr/bin/python3", "-m", "venv", venv_.string()}, "venv.log", 120s), 0)
        << testing::ReadFile(dir_ / "venv.log");
    // The requirements: links to each package of the project environment but the
    // reporting library, pip and setuptools, named by a .pth file of the venv.
    const fs::path links = dir_ / "requirements";
    fs::create_directories(links);
    static const std::regex kNotARequirement(
        "(bakeoff_report.*|pip|pip-.*|setuptools|setuptools-.*|_distutils_hack|pkg_resources|wheel|wheel-.*|"
        "__pycache__|.*\\.pth)");
    for (const auto& entry : fs::directory_iterator(site_)) {
      const std::string name = entry.path().filename().string();
      if (std::regex_match(name, kNotARequirement)) continue;
      fs::create_symlink(entry.path(), links / name);
    }
    fs::path venv_site;
    for (const auto& entry : fs::directory_iterator(venv_ / "lib")) venv_site = entry.path() / "site-packages";
    std::ofstream(venv_site / "bakeoff-project-requirements.pth") << links.string() << "\n";
    ASSERT_EQ(Run({(venv_ / "bin/python").string(), "-m", "pip", "install", "--no-index", "--quiet",
                   kSource + "/experiments/python"},
                  "pip.log", 180s, {"PIP_NO_INPUT=1", "PIP_DISABLE_PIP_VERSION_CHECK=1"}),
              0)
        << testing::ReadFile(dir_ / "pip.log");
    // The library comes from the venv (pip), not from the project environment.
    ASSERT_EQ(Run({(venv_ / "bin/python").string(), "-c",
                   "import bakeoff_report, bakeoff_report.hf, peft, torch; print(bakeoff_report.__file__)"},
                  "import.log", 120s),
              0)
        << testing::ReadFile(dir_ / "import.log");
    EXPECT_NE(testing::ReadFile(dir_ / "import.log").find(venv_.string()), std::string::npos)
        << testing::ReadFile(dir_ / "import.log");
  }

  // Steps 3 to 5 for one script: train.py beside the guide's sweep, `bakeoff local
  // sweep.yaml --workers 1` in the activated venv; its JSON report.
  json RunTheGuide(const std::string& script, const std::string& sweep_name) {
    const fs::path project = dir_ / sweep_name;
    fs::create_directories(project);
    fs::copy_file(kSource + "/tests/integration/your_script/" + script, project / "train.py");
    const std::string sweep = GuideSweep(sweep_name);
    EXPECT_FALSE(sweep.empty()) << "docs/your-script.md has no sweep marked " << sweep_name;
    std::ofstream(project / "sweep.yaml") << sweep;
    const std::string path = (venv_ / "bin").string() + ":/usr/local/bin:/usr/bin:/bin";
    const int code = Run({kBin + "/bakeoff", "local", (project / "sweep.yaml").string(), "--workers", "1",
                          "--db", (project / "results.db").string(), "--cache-dir", (project / "cache").string(),
                          "--work-dir", (project / "work").string(), "--format", "json", "--output",
                          (project / "report.json").string(), "--linger", "0"},
                         sweep_name + ".log", 400s,
                         {"PATH=" + path, "VIRTUAL_ENV=" + venv_.string(), "BAKEOFF_TOKEN=", "HF_HUB_OFFLINE=1",
                          "TRANSFORMERS_OFFLINE=1", "PYTHONPATH=", "TORCHINDUCTOR_CACHE_DIR=", "BAKEOFF_VENV="});
    EXPECT_EQ(code, 0) << testing::ReadFile(dir_ / (sweep_name + ".log"));
    if (!fs::exists(project / "report.json")) return nullptr;
    return json::parse(testing::ReadFile(project / "report.json"), nullptr, false);
  }

  // The comparison of compile on against off: tokens/s on both sides, a speedup, and
  // the warm-up split into a cold and a warm compile.
  static void ExpectAComparisonWithAColdAndAWarmCompile(const json& report, const std::string& on) {
    ASSERT_TRUE(report.is_object()) << "no JSON report";
    const json* compiled = nullptr;
    std::map<std::string, const json*> by_key;
    for (const auto& v : report["variants"]) {
      by_key[v.value("key", "")] = &v;
      if (v.value("key", "") == on) compiled = &v;
    }
    ASSERT_NE(compiled, nullptr) << "no variant " << on << " in " << report["variants"].dump();
    const json& c = (*compiled)["comparison"];
    EXPECT_EQ(c.value("status", ""), "compared") << c.dump();
    ASSERT_TRUE(c.contains("speedup")) << c.dump();
    EXPECT_GT(c["speedup"].value("value", 0.0), 0.0);
    ASSERT_TRUE(by_key.count((*compiled)["counterpart_key"].get<std::string>()));
    EXPECT_TRUE((*compiled)["tokens_per_s"].is_number()) << compiled->dump();
    EXPECT_TRUE((*by_key[(*compiled)["counterpart_key"].get<std::string>()])["tokens_per_s"].is_number());
    std::set<std::string> states;
    for (const auto& cost : c["warmup"]["by_compile_cache"]) states.insert(cost.value("compile_cache", ""));
    EXPECT_TRUE(states.count("cold")) << c["warmup"].dump();
    EXPECT_TRUE(states.count("warm")) << c["warmup"].dump();
    // Compile evidence per variant (graphs, breaks, recompiles, cache hits).
    ASSERT_TRUE((*compiled)["compile"].is_object()) << compiled->dump();
    EXPECT_GT((*compiled)["compile"].value("graphs", 0.0), 0.0);
    EXPECT_GT((*compiled)["compile"].value("cache_hits", 0), 0);
  }

  fs::path site_;
  fs::path dir_;
  fs::path venv_;
};

TEST_F(YourScriptGuideTest, ThreeScriptsReachAVerdictByTheGuideAlone) {
  MakeTheVenv();
  if (HasFatalFailure()) return;
  ExpectAComparisonWithAColdAndAWarmCompile(RunTheGuide("argparse_loop.py", "flags"), "compile=true");
  ExpectAComparisonWithAColdAndAWarmCompile(RunTheGuide("env_loop.py", "env"), "compile=1");
  ExpectAComparisonWithAColdAndAWarmCompile(RunTheGuide("hf_trainer_peft.py", "hf"), "compile=true");
}

}  // namespace
}  // namespace bakeoff
