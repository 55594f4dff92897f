// Length-prefixed JSON frames of the worker protocol: a 4-byte big-endian payload
// length followed by that many bytes of UTF-8 JSON (one object). The codec is pure (no
// I/O) so that it can be fuzzed and unit-tested: a malformed, oversized or truncated
// frame is a Status, never a crash or an unbounded allocation.
// Thread-safety: EncodeFrame is a pure function; a FrameDecoder is used by one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "protocol/status.h"

namespace bakeoff::protocol {

// Largest payload accepted by default (4 MiB). Both sides enforce it; a peer that sends
// more is disconnected. An events batch is split well below it by the worker.
inline constexpr std::size_t kDefaultMaxFrameBytes = 4u << 20;
inline constexpr std::size_t kFrameHeaderBytes = 4;
// Largest first frame (`register`) a listener accepts before the peer has
// authenticated (64 KiB): a peer without a token cannot make the coordinator allocate
// more than this per connection. A register frame is a few hundred bytes.
inline constexpr std::size_t kMaxPreAuthFrameBytes = 64u << 10;

// Serialises `message` (must be a JSON object) into header + payload.
// Fails with kResourceExhausted when the payload exceeds `max_frame_bytes`.
Result<std::string> EncodeFrame(const nlohmann::json& message,
                                std::size_t max_frame_bytes = kDefaultMaxFrameBytes);

// Reads the payload length from a 4-byte header; fails when it exceeds the limit or is
// zero (an empty payload is never valid JSON).
Result<std::uint32_t> DecodeFrameHeader(const unsigned char* header,
                                        std::size_t max_frame_bytes = kDefaultMaxFrameBytes);

// Parses one payload into a JSON object; malformed JSON or a non-object is an error.
Result<nlohmann::json> DecodeFramePayload(std::string_view payload);

// Incremental decoder for a byte stream that may deliver frames split or coalesced.
class FrameDecoder {
 public:
  explicit FrameDecoder(std::size_t max_frame_bytes = kDefaultMaxFrameBytes)
      : max_frame_bytes_(max_frame_bytes) {}

  // Appends received bytes. Never allocates more than one frame past the limit check.
  void Append(std::string_view bytes) { buffer_.append(bytes); }

  // Returns the next complete frame, nullopt when more bytes are needed, or an error.
  // After an error the stream is out of sync: the caller must drop the connection.
  Result<std::optional<nlohmann::json>> Next();

  std::size_t buffered_bytes() const { return buffer_.size() - consumed_; }

 private:
  std::size_t max_frame_bytes_;
  std::string buffer_;
  std::size_t consumed_ = 0;
};

}  // namespace bakeoff::protocol
