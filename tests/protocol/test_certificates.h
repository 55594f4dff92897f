// Certificates made at test time with the openssl CLI (nothing secret is checked in):
// a private CA, a server certificate it signs for 127.0.0.1 and localhost, a second
// certificate it signs for another host only, and an unrelated CA. EC P-256 keys, valid
// two days. Thread-safety: functions; each test uses its own directory.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "protocol/status.h"

namespace bakeoff::testing {

struct TestCertificates {
  std::string ca_cert;         // the CA that signed server_cert and elsewhere_cert
  std::string server_cert;     // SAN IP:127.0.0.1, DNS:localhost
  std::string server_key;
  std::string elsewhere_cert;  // SAN DNS:elsewhere.example only
  std::string elsewhere_key;
  std::string other_ca_cert;   // a CA that signed none of them
};

inline Result<TestCertificates> MakeTestCertificates(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  const std::string d = dir.string();
  const std::string log = d + "/openssl.log";
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  auto make_ca = [&](const std::string& name, const std::string& cn) {
    return "openssl req -x509 " + key + " -keyout '" + d + "/" + name + ".key' -out '" + d + "/" + name +
           ".pem' -days 2 -subj '/CN=" + cn + "' -addext 'basicConstraints=critical,CA:TRUE' " +
           "-addext 'keyUsage=critical,keyCertSign,cRLSign' >>'" + log + "' 2>&1";
  };
  auto make_leaf = [&](const std::string& name, const std::string& san) {
    const std::string ext = d + "/" + name + ".ext";
    std::ofstream(ext) << "subjectAltName=" << san << "\nbasicConstraints=CA:FALSE\n"
                       << "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n";
    return "openssl req " + key + " -keyout '" + d + "/" + name + ".key' -out '" + d + "/" + name +
           ".csr' -subj '/CN=" + name + "' >>'" + log + "' 2>&1 && openssl x509 -req -in '" + d + "/" + name +
           ".csr' -CA '" + d + "/ca.pem' -CAkey '" + d + "/ca.key' -CAcreateserial -days 2 -extfile '" + ext +
           "' -out '" + d + "/" + name + ".pem' >>'" + log + "' 2>&1";
  };
  const std::string commands[] = {
      make_ca("ca", "Bakeoff Test CA"),
      make_ca("other_ca", "Some Other CA"),
      make_leaf("server", "IP:127.0.0.1,DNS:localhost"),
      make_leaf("elsewhere", "DNS:elsewhere.example"),
  };
  for (const auto& command : commands) {
    if (std::system(command.c_str()) != 0) {
      std::ifstream in(log);
      return Status::Internal("openssl failed (is the openssl CLI installed?): " + command + "\n" +
                              std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
    }
  }
  TestCertificates certs;
  certs.ca_cert = d + "/ca.pem";
  certs.server_cert = d + "/server.pem";
  certs.server_key = d + "/server.key";
  certs.elsewhere_cert = d + "/elsewhere.pem";
  certs.elsewhere_key = d + "/elsewhere.key";
  certs.other_ca_cert = d + "/other_ca.pem";
  return certs;
}

}  // namespace bakeoff::testing
