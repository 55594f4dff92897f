#include "worker/slurm_allocation.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace bakeoff::worker {
namespace {

auto Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(SlurmAllocationTest, OutsideSlurmChangesNothing) {
  auto a = ReadSlurmAllocation(Env({{"CUDA_VISIBLE_DEVICES", "0,1"}}));
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->present());
  WorkerConfig config;
  config.name = "";
  ApplySlurmAllocation(*a, {}, false, config);
  EXPECT_EQ(config.slurm_job_id, "");
  EXPECT_EQ(config.advertise_host, "127.0.0.1");
  EXPECT_TRUE(config.cuda_devices.empty());
}

TEST(SlurmAllocationTest, NameHostAndGpusComeFromTheAllocation) {
  auto a = ReadSlurmAllocation(
      Env({{"SLURM_JOB_ID", "4711"}, {"SLURMD_NODENAME", "gpu017"}, {"CUDA_VISIBLE_DEVICES", "2,3"},
           {"SLURM_JOB_GPUS", "2,3"}}));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  WorkerConfig config;
  ApplySlurmAllocation(*a, {}, /*slots_given=*/false, config);
  EXPECT_EQ(config.slurm_job_id, "4711");
  EXPECT_EQ(config.name, "gpu017-4711");
  EXPECT_EQ(config.advertise_host, "gpu017");
  EXPECT_EQ(config.cuda_devices, (std::vector<int>{2, 3}));
  EXPECT_EQ(config.cpu_slots, 0);  // a GPU worker offers its GPUs, not CPU slots
  EXPECT_EQ(a->gpus_source, "CUDA_VISIBLE_DEVICES");
}

TEST(SlurmAllocationTest, JobGpusRangesAreExpandedWhenCudaVisibleDevicesIsUnset) {
  auto a = ReadSlurmAllocation(Env({{"SLURM_JOB_ID", "9"}, {"SLURMD_NODENAME", "n1"}, {"SLURM_JOB_GPUS", "0-2,5"}}));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->gpus, (std::vector<int>{0, 1, 2, 5}));
  EXPECT_EQ(a->gpus_source, "SLURM_JOB_GPUS");
}

TEST(SlurmAllocationTest, ExplicitFlagsWin) {
  auto a = ReadSlurmAllocation(Env({{"SLURM_JOB_ID", "9"}, {"SLURMD_NODENAME", "n1"}, {"SLURM_JOB_GPUS", "0,1"}}));
  ASSERT_TRUE(a.ok());
  WorkerConfig config;
  config.name = "mine";
  config.advertise_host = "10.0.0.5";
  config.cuda_devices = {1};
  config.cpu_slots = 4;
  ApplySlurmAllocation(*a, {true, true, true}, true, config);
  EXPECT_EQ(config.name, "mine");
  EXPECT_EQ(config.advertise_host, "10.0.0.5");
  EXPECT_EQ(config.cuda_devices, (std::vector<int>{1}));
  EXPECT_EQ(config.cpu_slots, 4);
  EXPECT_EQ(config.slurm_job_id, "9");  // recorded whatever the flags say
}

TEST(SlurmAllocationTest, TwoJobsOnOneNodeGetDifferentStorePorts) {
  auto a = ReadSlurmAllocation(Env({{"SLURM_JOB_ID", "7"}, {"SLURMD_NODENAME", "n1"}}));
  auto b = ReadSlurmAllocation(Env({{"SLURM_JOB_ID", "8"}, {"SLURMD_NODENAME", "n1"}}));
  ASSERT_TRUE(a.ok() && b.ok());
  WorkerConfig ca, cb;
  ApplySlurmAllocation(*a, {}, false, ca);
  ApplySlurmAllocation(*b, {}, false, cb);
  EXPECT_EQ(ca.store_ports.first, 29570);
  EXPECT_EQ(ca.store_ports.last, 29579);
  EXPECT_TRUE(ca.store_ports.last < cb.store_ports.first || cb.store_ports.last < ca.store_ports.first);
  // Slurm's reserved ports win; --store-ports wins over both.
  auto r = ReadSlurmAllocation(Env({{"SLURM_JOB_ID", "7"}, {"SLURM_STEP_RESV_PORTS", "12000-12003"}}));
  ASSERT_TRUE(r.ok());
  WorkerConfig cr;
  ApplySlurmAllocation(*r, {}, false, cr);
  EXPECT_EQ(cr.store_ports.first, 12000);
  EXPECT_EQ(cr.store_ports.last, 12003);
  WorkerConfig explicit_ports;
  explicit_ports.store_ports = {40000, 40099};
  ExplicitWorkerFlags given;
  given.store_ports = true;
  ApplySlurmAllocation(*r, given, false, explicit_ports);
  EXPECT_EQ(explicit_ports.store_ports.first, 40000);
}

TEST(SlurmAllocationTest, GpuUuidsAskForExplicitDevices) {
  auto a = ReadSlurmAllocation(Env({{"SLURM_JOB_ID", "9"}, {"CUDA_VISIBLE_DEVICES", "GPU-5e1f"}}));
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("--cuda-devices"), std::string::npos);
  EXPECT_NE(a.status().message().find("CUDA_VISIBLE_DEVICES"), std::string::npos);
}

}  // namespace
}  // namespace bakeoff::worker
