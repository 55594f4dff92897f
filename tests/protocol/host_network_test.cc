#include "protocol/host_network.h"

#include <gtest/gtest.h>

namespace bakeoff::protocol {
namespace {

// Loopback is the one interface every test machine has.
TEST(HostNetworkTest, LoopbackAddressIsHeldByTheLoopbackInterface) {
  EXPECT_EQ(InterfaceHolding("127.0.0.1"), "lo");
  EXPECT_EQ(InterfaceHolding("localhost"), "lo") << "a name is resolved first";
}

TEST(HostNetworkTest, AnAddressOfNoInterfaceHereIsHeldByNone) {
  EXPECT_EQ(InterfaceHolding("192.0.2.77"), "");  // TEST-NET-1: never assigned
  EXPECT_EQ(InterfaceHolding("no-such-host.invalid"), "");
}

TEST(HostNetworkTest, InterfaceAddressPrefersIpv4) {
  auto address = InterfaceAddress("lo");
  ASSERT_TRUE(address.ok()) << address.status().ToString();
  EXPECT_EQ(*address, "127.0.0.1");
}

TEST(HostNetworkTest, UnknownInterfaceIsNotFoundNamingIt) {
  auto address = InterfaceAddress("bakeoff-none0");
  ASSERT_FALSE(address.ok());
  EXPECT_EQ(address.status().code(), Status::Code::kNotFound);
  EXPECT_NE(address.status().message().find("bakeoff-none0"), std::string::npos);
}

TEST(HostNetworkTest, LocalAddressTowardLoopbackIsLoopback) {
  EXPECT_EQ(LocalAddressToward("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(LocalAddressToward("no-such-host.invalid"), "");
}

}  // namespace
}  // namespace bakeoff::protocol
