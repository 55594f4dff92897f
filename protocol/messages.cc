#include "protocol/messages.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <exception>

namespace bakeoff::protocol {

bool IsValidWorkerName(const std::string& name) {
  if (name.empty() || name.size() > kMaxWorkerNameBytes) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') return false;
  }
  return true;
}

namespace {

// The 16 bytes of an IPv6 literal, or an IPv4 literal as its IPv4-mapped form; false
// when `text` is neither.
bool ParseIp(const std::string& text, unsigned char (&out)[16]) {
  std::string bare = text.size() > 2 && text.front() == '[' && text.back() == ']' ? text.substr(1, text.size() - 2) : text;
  in_addr v4{};
  if (inet_pton(AF_INET, bare.c_str(), &v4) == 1) {
    std::memset(out, 0, 10);
    out[10] = out[11] = 0xff;
    std::memcpy(out + 12, &v4, 4);
    return true;
  }
  return inet_pton(AF_INET6, bare.c_str(), out) == 1;
}

bool IsV4Mapped(const unsigned char (&a)[16]) {
  static const unsigned char kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(a, kPrefix, 12) == 0;
}

bool IsHostName(const std::string& host) {
  if (host.empty() || host.size() > 253) return false;
  std::size_t start = 0;
  bool last_all_digits = false;
  while (start <= host.size()) {
    std::size_t end = host.find('.', start);
    if (end == std::string::npos) end = host.size();
    const std::size_t length = end - start;
    if (length == 0 || length > 63 || host[start] == '-' || host[end - 1] == '-') return false;
    last_all_digits = true;
    for (std::size_t i = start; i < end; ++i) {
      const auto c = static_cast<unsigned char>(host[i]);
      if (!std::isalnum(c) && c != '-') return false;
      last_all_digits = last_all_digits && std::isdigit(c);
    }
    start = end + 1;
  }
  return !last_all_digits;  // "1.2.3" or "2852039166" are not names but numeric hosts
}

}  // namespace

bool GpuTypeMatches(const std::string& gpu_model, const std::string& gpu_type) {
  if (gpu_type.empty()) return true;
  auto lower = [](std::string text) {
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
  };
  return lower(gpu_model).find(lower(gpu_type)) != std::string::npos;
}

Result<std::string> ScrapeAddress(const std::string& host, const std::string& peer_address) {
  unsigned char ip[16];
  unsigned char peer[16];
  const bool peer_known = !peer_address.empty() && ParseIp(peer_address, peer);
  if (ParseIp(host, ip)) {
    if (peer_known && std::memcmp(ip, peer, 16) == 0) return host;
    const char* refused = nullptr;
    static const unsigned char kLoopback6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (IsV4Mapped(ip)) {
      if (ip[12] == 127) refused = "loopback (127.0.0.0/8), and not the connection's own address";
      if (ip[12] == 169 && ip[13] == 254) refused = "link-local (169.254.0.0/16)";
      if (ip[12] == 0) refused = "unspecified (0.0.0.0/8)";
      if (ip[12] >= 224) refused = "multicast or reserved (224.0.0.0/3)";
    } else {
      static const unsigned char kZero[16] = {};
      if (ip[0] == 0xfe && (ip[1] & 0xc0) == 0x80) refused = "link-local (fe80::/10)";
      if (ip[0] == 0xff) refused = "multicast (ff00::/8)";
      if (std::memcmp(ip, kZero, 16) == 0) refused = "unspecified (::)";
      if (std::memcmp(ip, kLoopback6, 16) == 0) refused = "loopback (::1), and not the connection's own address";
    }
    if (!refused) return host;
    return Status::InvalidArgument("address " + host + " is " + refused +
                                   "; advertise an address Prometheus can scrape, or none for the connection's");
  }
  if (IsHostName(host)) {
    if (peer_known) return peer_address;
    return Status::InvalidArgument("host name " + host +
                                   " is not resolved here, and the connection's own address is unknown; "
                                   "advertise an IP address");
  }
  return Status::InvalidArgument(
      "it is neither an IP address nor a host name (labels of letters, digits and '-', joined by '.')");
}

namespace {

using nlohmann::json;

json AttemptJson(const AttemptRef& a) { return {{"trial_id", a.trial_id}, {"attempt", a.attempt}}; }

AttemptRef ReadAttempt(const json& j) {
  return AttemptRef{j.at("trial_id").get<std::int64_t>(), j.at("attempt").get<int>()};
}

// A JSON array of `to_json(item)` for each item, in order.
template <typename T, typename F>
json JsonArray(const std::vector<T>& items, F to_json) {
  json out = json::array();
  for (const auto& item : items) out.push_back(to_json(item));
  return out;
}

json AttemptList(const std::vector<AttemptRef>& list) { return JsonArray(list, AttemptJson); }

std::vector<AttemptRef> ReadAttemptList(const json& j, const char* field) {
  std::vector<AttemptRef> out;
  if (!j.contains(field)) return out;
  for (const auto& item : j.at(field)) out.push_back(ReadAttempt(item));
  return out;
}

json Typed(const char* type) { return json{{"type", type}}; }

// The head of a message about one attempt: its type, trial_id and attempt.
json TypedForAttempt(const char* type, const AttemptRef& attempt) {
  json j = AttemptJson(attempt);
  j["type"] = type;
  return j;
}

// Runs `parse` and turns nlohmann's type and key errors into a Status naming the type.
template <typename T, typename F>
Result<T> Guarded(const json& frame, const char* type, F parse) {
  if (!frame.is_object()) return Status::InvalidArgument(std::string(type) + ": not a JSON object");
  auto found = frame.find("type");
  if (found == frame.end() || !found->is_string() || found->get<std::string>() != type) {
    return Status::InvalidArgument(std::string("expected a '") + type + "' message");
  }
  try {
    return parse(frame);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("malformed '") + type + "' message: " + e.what());
  }
}

// The rows of a step block: 1 to kMaxStepBlockRows steps whose columns read
// (ReadStepColumns), in strictly increasing step order, of phase warmup or measure.
Status ReadStepBlockRows(const json& b, StepBlock& block) {
  if (block.phase != "warmup" && block.phase != "measure") {
    return Status::InvalidArgument("step block: phase must be \"warmup\" or \"measure\"");
  }
  auto steps = b.find("step");
  if (steps == b.end() || !steps->is_array() || steps->empty() || steps->size() > kMaxStepBlockRows) {
    return Status::InvalidArgument("step block: \"step\" must be an array of 1 to " +
                                   std::to_string(kMaxStepBlockRows) + " steps");
  }
  BAKEOFF_RETURN_IF_ERROR(ReadStepColumns(b, block.rows));
  for (std::size_t i = 1; i < block.rows.size(); ++i) {
    if (block.rows[i].step <= block.rows[i - 1].step) {
      return Status::InvalidArgument("step block: steps must increase (step " + std::to_string(block.rows[i].step) +
                                     " after " + std::to_string(block.rows[i - 1].step) + ")");
    }
  }
  return Status::Ok();
}

}  // namespace

json ToJson(const RegisterMessage& m) {
  json j = Typed(kTypeRegister);
  j["token"] = m.token;
  j["worker_name"] = m.worker_name;
  if (!m.worker_secret.empty()) j["worker_secret"] = m.worker_secret;
  j["host"] = m.host;
  j["resources"] = {{"cpu_slots", m.resources.cpu_slots}, {"cuda_devices", m.resources.cuda_devices}};
  if (!m.resources.gpu_model.empty()) j["resources"]["gpu_model"] = m.resources.gpu_model;
  j["store_ports"] = {{"first", m.store_ports.first}, {"last", m.store_ports.last}};
  j["running"] = AttemptList(m.running);
  j["metrics_port"] = m.metrics_port;
  if (!m.metrics_host.empty()) j["metrics_host"] = m.metrics_host;
  j["simulate"] = m.simulate;
  if (!m.executors.empty()) j["executors"] = m.executors;
  if (!m.slurm_job_id.empty()) j["slurm_job_id"] = m.slurm_job_id;
  j["protocol_version"] = m.protocol_version;
  return j;
}

json ToJson(const RegisteredMessage& m) {
  json j = Typed(kTypeRegistered);
  j["worker_id"] = m.worker_id;
  j["heartbeat_interval_ms"] = m.heartbeat_interval_ms;
  j["heartbeat_timeout_ms"] = m.heartbeat_timeout_ms;
  j["worker_secret"] = m.worker_secret;
  return j;
}

json ToJson(const RejectedMessage& m) {
  json j = Typed(kTypeRejected);
  j["reason"] = m.reason;
  if (m.retry_after_ms > 0) j["retry_after_ms"] = m.retry_after_ms;
  return j;
}

json ToJson(const HeartbeatMessage& m) {
  json j = Typed(kTypeHeartbeat);
  j["running"] = AttemptList(m.running);
  return j;
}

json ToJson(const AssignMessage& m) {
  json j = TypedForAttempt(kTypeAssign, m.attempt);
  j["sweep_id"] = m.sweep_id;
  j["variant_key"] = m.variant_key;
  j["config"] = m.config;
  j["ranks"] = JsonArray(m.ranks, [](const RankSlot& r) -> json {
    return {{"rank", r.rank}, {"local_rank", r.local_rank}, {"cuda_devices", r.cuda_devices}};
  });
  j["world_size"] = m.world_size;
  j["store_address"] = m.store_address;
  j["timeout_ms"] = m.timeout_ms;
  if (m.lockstep) {
    j["lockstep"] = {{"group", m.lockstep->group}, {"side", m.lockstep->side}, {"sides", m.lockstep->sides},
                     {"turn_timeout_ms", m.lockstep->turn_timeout_ms}};
  }
  return j;
}

json ToJson(const CancelMessage& m) {
  json j = TypedForAttempt(kTypeCancel, m.attempt);
  j["reason"] = m.reason;
  return j;
}

json ToJson(const DrainMessage&) { return Typed(kTypeDrain); }
json ToJson(const GoodbyeMessage&) { return Typed(kTypeGoodbye); }

json ToJson(const EventsMessage& m) {
  json j = Typed(kTypeEvents);
  j["events"] = JsonArray(m.events, [](const TrialEvent& e) {
    json event = AttemptJson(e.attempt);
    event["rank"] = e.rank;
    event["event"] = e.event;
    event["seq"] = e.seq;
    return event;
  });
  if (!m.steps.empty()) {
    j["steps"] = JsonArray(m.steps, [](const StepBlock& b) {
      json block = StepRowsToColumns(b.rows);
      block["trial_id"] = b.attempt.trial_id;
      block["attempt"] = b.attempt.attempt;
      block["rank"] = b.rank;
      block["phase"] = b.phase;
      return block;
    });
  }
  j["outbox_seq"] = m.outbox_seq;
  return j;
}

json ToJson(const AttemptFinishedMessage& m) {
  json j = TypedForAttempt(kTypeAttemptFinished, m.attempt);
  j["outcome"] = m.outcome;
  j["reason"] = m.reason;
  j["exits"] = JsonArray(m.exits, [](const RankExit& e) -> json {
    return {{"rank", e.rank}, {"exit_code", e.exit_code}, {"signal", e.signal}};
  });
  j["outbox_seq"] = m.outbox_seq;
  if (m.infrastructure) j["infrastructure"] = true;
  return j;
}

json ToJson(const AckMessage& m) {
  json j = Typed(kTypeAck);
  j["outbox_seq"] = m.outbox_seq;
  return j;
}

Result<std::string> MessageType(const json& frame) {
  if (!frame.is_object()) return Status::InvalidArgument("message is not a JSON object");
  auto found = frame.find("type");
  if (found == frame.end() || !found->is_string()) {
    return Status::InvalidArgument("message has no string 'type' field");
  }
  return found->get<std::string>();
}

template <>
Result<RegisterMessage> Parse<RegisterMessage>(const json& frame) {
  return Guarded<RegisterMessage>(frame, kTypeRegister, [](const json& j) {
    RegisterMessage m;
    m.token = j.at("token").get<std::string>();
    m.worker_name = j.at("worker_name").get<std::string>();
    m.worker_secret = j.value("worker_secret", std::string());
    m.host = j.at("host").get<std::string>();
    const json& res = j.at("resources");
    m.resources.cpu_slots = res.value("cpu_slots", 0);
    if (res.contains("cuda_devices")) m.resources.cuda_devices = res.at("cuda_devices").get<std::vector<int>>();
    m.resources.gpu_model = res.value("gpu_model", std::string());
    if (m.resources.gpu_model.size() > kMaxGpuModelBytes ||
        std::any_of(m.resources.gpu_model.begin(), m.resources.gpu_model.end(),
                    [](char c) { return c < 0x20 || c > 0x7e; })) {
      throw std::invalid_argument("resources.gpu_model: at most " + std::to_string(kMaxGpuModelBytes) +
                                  " printable ASCII characters");
    }
    if (j.contains("store_ports")) {
      m.store_ports.first = j.at("store_ports").at("first").get<int>();
      m.store_ports.last = j.at("store_ports").at("last").get<int>();
    }
    m.running = ReadAttemptList(j, "running");
    m.metrics_port = j.value("metrics_port", 0);
    m.metrics_host = j.value("metrics_host", std::string());
    m.simulate = j.value("simulate", false);
    if (j.contains("executors")) {
      m.executors = j.at("executors").get<std::vector<std::string>>();
      if (m.executors.size() > kMaxExecutorNames) {
        throw std::invalid_argument("executors: more than " + std::to_string(kMaxExecutorNames) + " names");
      }
      for (const auto& name : m.executors) {
        if (name.empty() || name.size() > 64 ||
            name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") !=
                std::string::npos) {
          throw std::invalid_argument("executors: a template name is 1-64 of [A-Za-z0-9._-]");
        }
      }
    }
    m.slurm_job_id = j.value("slurm_job_id", std::string());
    if (m.slurm_job_id.size() > 32 || m.slurm_job_id.find_first_not_of("0123456789_") != std::string::npos) {
      throw std::invalid_argument("slurm_job_id: at most 32 of [0-9_]");
    }
    m.protocol_version = j.value("protocol_version", 0);
    return m;
  });
}

template <>
Result<RegisteredMessage> Parse<RegisteredMessage>(const json& frame) {
  return Guarded<RegisteredMessage>(frame, kTypeRegistered, [](const json& j) {
    RegisteredMessage m;
    m.worker_id = j.at("worker_id").get<std::string>();
    m.heartbeat_interval_ms = j.at("heartbeat_interval_ms").get<std::int64_t>();
    m.heartbeat_timeout_ms = j.value("heartbeat_timeout_ms", m.heartbeat_interval_ms * 10);
    m.worker_secret = j.value("worker_secret", std::string());
    return m;
  });
}

template <>
Result<RejectedMessage> Parse<RejectedMessage>(const json& frame) {
  return Guarded<RejectedMessage>(frame, kTypeRejected, [](const json& j) {
    return RejectedMessage{j.value("reason", std::string("rejected")), j.value("retry_after_ms", std::int64_t{0})};
  });
}

template <>
Result<HeartbeatMessage> Parse<HeartbeatMessage>(const json& frame) {
  return Guarded<HeartbeatMessage>(frame, kTypeHeartbeat, [](const json& j) {
    return HeartbeatMessage{ReadAttemptList(j, "running")};
  });
}

template <>
Result<AssignMessage> Parse<AssignMessage>(const json& frame) {
  return Guarded<AssignMessage>(frame, kTypeAssign, [](const json& j) -> Result<AssignMessage> {
    AssignMessage m;
    m.attempt = ReadAttempt(j);
    m.sweep_id = j.value("sweep_id", std::string());
    m.variant_key = j.value("variant_key", std::string());
    m.config = j.at("config");
    if (!m.config.is_object()) return Status::InvalidArgument("assign: 'config' must be an object");
    for (const auto& r : j.at("ranks")) {
      RankSlot slot;
      slot.rank = r.at("rank").get<int>();
      slot.local_rank = r.at("local_rank").get<int>();
      if (r.contains("cuda_devices")) slot.cuda_devices = r.at("cuda_devices").get<std::vector<int>>();
      m.ranks.push_back(slot);
    }
    m.world_size = j.at("world_size").get<int>();
    m.store_address = j.at("store_address").get<std::string>();
    m.timeout_ms = j.value("timeout_ms", std::int64_t{0});
    if (auto it = j.find("lockstep"); it != j.end() && !it->is_null()) {
      LockstepSide side;
      side.group = it->at("group").get<std::string>();
      side.side = it->at("side").get<int>();
      side.sides = it->at("sides").get<int>();
      side.turn_timeout_ms = it->value("turn_timeout_ms", side.turn_timeout_ms);
      if (side.group.empty() || side.sides < 1 || side.sides > kMaxLockstepSides || side.side < 0 ||
          side.side >= side.sides || side.turn_timeout_ms < 1) {
        return Status::InvalidArgument("assign: 'lockstep' needs a group, 1 <= sides <= " +
                                       std::to_string(kMaxLockstepSides) + ", 0 <= side < sides and a turn timeout >= 1 ms");
      }
      m.lockstep = side;
    }
    if (m.ranks.empty()) return Status::InvalidArgument("assign: 'ranks' is empty");
    if (m.world_size < 1) return Status::InvalidArgument("assign: 'world_size' must be >= 1");
    for (const auto& r : m.ranks) {
      if (r.rank < 0 || r.rank >= m.world_size) {
        return Status::InvalidArgument("assign: rank " + std::to_string(r.rank) +
                                       " outside world size " + std::to_string(m.world_size));
      }
    }
    return m;
  });
}

template <>
Result<CancelMessage> Parse<CancelMessage>(const json& frame) {
  return Guarded<CancelMessage>(frame, kTypeCancel, [](const json& j) {
    return CancelMessage{ReadAttempt(j), j.value("reason", std::string())};
  });
}

template <>
Result<DrainMessage> Parse<DrainMessage>(const json& frame) {
  return Guarded<DrainMessage>(frame, kTypeDrain, [](const json&) { return DrainMessage{}; });
}

template <>
Result<GoodbyeMessage> Parse<GoodbyeMessage>(const json& frame) {
  return Guarded<GoodbyeMessage>(frame, kTypeGoodbye, [](const json&) { return GoodbyeMessage{}; });
}

template <>
Result<EventsMessage> Parse<EventsMessage>(const json& frame) {
  return Guarded<EventsMessage>(frame, kTypeEvents, [](const json& j) -> Result<EventsMessage> {
    EventsMessage m;
    for (const auto& e : j.at("events")) {
      TrialEvent ev;
      ev.attempt = ReadAttempt(e);
      ev.rank = e.at("rank").get<int>();
      ev.event = e.at("event");
      ev.seq = e.value("seq", std::int64_t{0});
      if (!ev.event.is_object()) return Status::InvalidArgument("events: an 'event' is not an object");
      m.events.push_back(std::move(ev));
    }
    if (auto steps = j.find("steps"); steps != j.end()) {
      for (const auto& b : steps->get_ref<const json::array_t&>()) {
        StepBlock block;
        block.attempt = ReadAttempt(b);
        block.rank = b.at("rank").get<int>();
        block.phase = b.at("phase").get<std::string>();
        Status read = ReadStepBlockRows(b, block);
        if (read.ok()) {
          m.steps.push_back(std::move(block));
        } else {
          m.unreadable_steps.push_back("trial " + std::to_string(block.attempt.trial_id) + " attempt " +
                                       std::to_string(block.attempt.attempt) + " rank " +
                                       std::to_string(block.rank) + ": " + read.message());
        }
      }
    }
    m.outbox_seq = j.value("outbox_seq", std::int64_t{0});
    return m;
  });
}

template <>
Result<AttemptFinishedMessage> Parse<AttemptFinishedMessage>(const json& frame) {
  return Guarded<AttemptFinishedMessage>(frame, kTypeAttemptFinished, [](const json& j) {
    AttemptFinishedMessage m;
    m.attempt = ReadAttempt(j);
    m.outcome = j.at("outcome").get<std::string>();
    m.reason = j.value("reason", std::string());
    if (j.contains("exits")) {
      for (const auto& e : j.at("exits")) {
        m.exits.push_back(RankExit{e.at("rank").get<int>(), e.value("exit_code", -1), e.value("signal", 0)});
      }
    }
    m.outbox_seq = j.value("outbox_seq", std::int64_t{0});
    m.infrastructure = j.value("infrastructure", false);
    return m;
  });
}

template <>
Result<AckMessage> Parse<AckMessage>(const json& frame) {
  return Guarded<AckMessage>(frame, kTypeAck, [](const json& j) {
    return AckMessage{j.at("outbox_seq").get<std::int64_t>()};
  });
}

}  // namespace bakeoff::protocol
