#include "protocol/frame_codec.h"

#include "protocol/json_limits.h"

namespace bakeoff::protocol {

Result<std::string> EncodeFrame(const nlohmann::json& message, std::size_t max_frame_bytes) {
  if (!message.is_object()) {
    return Status::InvalidArgument("frame payload must be a JSON object, got " +
                                   std::string(message.type_name()));
  }
  std::string payload;
  try {
    // Replace invalid UTF-8 instead of throwing: trainer output is not trusted.
    payload = message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(std::string("cannot serialise frame: ") + e.what());
  }
  if (payload.size() > max_frame_bytes) {
    return Status::ResourceExhausted("frame of " + std::to_string(payload.size()) +
                                     " bytes exceeds the limit of " +
                                     std::to_string(max_frame_bytes) + " bytes");
  }
  std::string frame;
  frame.reserve(kFrameHeaderBytes + payload.size());
  const auto n = static_cast<std::uint32_t>(payload.size());
  frame.push_back(static_cast<char>((n >> 24) & 0xff));
  frame.push_back(static_cast<char>((n >> 16) & 0xff));
  frame.push_back(static_cast<char>((n >> 8) & 0xff));
  frame.push_back(static_cast<char>(n & 0xff));
  frame += payload;
  return frame;
}

Result<std::uint32_t> DecodeFrameHeader(const unsigned char* header, std::size_t max_frame_bytes) {
  const std::uint32_t n = (std::uint32_t{header[0]} << 24) | (std::uint32_t{header[1]} << 16) |
                          (std::uint32_t{header[2]} << 8) | std::uint32_t{header[3]};
  if (n == 0) return Status::InvalidArgument("frame with an empty payload");
  if (n > max_frame_bytes) {
    return Status::ResourceExhausted("frame announces " + std::to_string(n) +
                                     " bytes, over the limit of " +
                                     std::to_string(max_frame_bytes) + " bytes");
  }
  return n;
}

Result<nlohmann::json> DecodeFramePayload(std::string_view payload) {
  if (Status deep = CheckJsonDepth(payload); !deep.ok()) return deep.WithContext("frame payload");
  nlohmann::json j = nlohmann::json::parse(payload.begin(), payload.end(), nullptr,
                                           /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("frame payload is not valid JSON");
  if (!j.is_object()) {
    return Status::InvalidArgument("frame payload must be a JSON object, got " +
                                   std::string(j.type_name()));
  }
  return j;
}

Result<std::optional<nlohmann::json>> FrameDecoder::Next() {
  if (buffered_bytes() < kFrameHeaderBytes) return std::optional<nlohmann::json>();
  auto header = reinterpret_cast<const unsigned char*>(buffer_.data() + consumed_);
  auto length = DecodeFrameHeader(header, max_frame_bytes_);
  if (!length.ok()) return length.status();
  if (buffered_bytes() < kFrameHeaderBytes + *length) return std::optional<nlohmann::json>();
  std::string_view payload(buffer_.data() + consumed_ + kFrameHeaderBytes, *length);
  consumed_ += kFrameHeaderBytes + *length;
  auto json = DecodeFramePayload(payload);
  // Compact once the consumed prefix dominates, so the buffer stays bounded.
  if (consumed_ > 0 && consumed_ * 2 >= buffer_.size()) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  if (!json.ok()) return json.status();
  return std::optional<nlohmann::json>(std::move(json).value());
}

}  // namespace bakeoff::protocol
