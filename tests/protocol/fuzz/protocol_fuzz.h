// The bodies of the protocol's fuzz targets, shared by the libFuzzer executables
// (built with -DBAKEOFF_FUZZ=ON and clang, scripts/fuzz) and by the corpus regression
// test that every build runs (tests/protocol/protocol_fuzz_corpus_test.cc). Any input must end in
// values or Statuses: no crash, no exception, no unbounded time or memory.
// Thread-safety: reentrant.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "protocol/frame_codec.h"
#include "protocol/messages.h"
#include "protocol/trainer_event.h"

namespace bakeoff::protocol {

// Every message parser on one decoded frame: each gives a value or a Status.
inline void ParseEveryMessageType(const nlohmann::json& frame) {
  (void)MessageType(frame);
  (void)Parse<RegisterMessage>(frame);
  (void)Parse<RegisteredMessage>(frame);
  (void)Parse<RejectedMessage>(frame);
  (void)Parse<HeartbeatMessage>(frame);
  (void)Parse<AssignMessage>(frame);
  (void)Parse<CancelMessage>(frame);
  (void)Parse<DrainMessage>(frame);
  if (auto events = Parse<EventsMessage>(frame); events.ok()) {
    for (const auto& e : events->events) (void)TrainerEventFromJson(e.event);  // the coordinator's typed read
  }
  (void)Parse<AttemptFinishedMessage>(frame);
  (void)Parse<AckMessage>(frame);
}

// A byte stream into the frame decoder, split into chunks whose size the first byte
// picks (frames arrive split and coalesced), under a 64 KiB frame limit.
inline void FuzzFrameDecoder(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return;
  const std::size_t chunk = static_cast<std::size_t>(data[0] % 97) + 1;
  FrameDecoder decoder(64 * 1024);
  for (std::size_t at = 1; at < size; at += chunk) {
    decoder.Append(std::string_view(reinterpret_cast<const char*>(data) + at, std::min(chunk, size - at)));
    while (true) {
      auto next = decoder.Next();
      if (!next.ok()) return;  // out of sync: a connection would be dropped here
      if (!next->has_value()) break;
      ParseEveryMessageType(**next);
    }
  }
}

// Lines of a trainer's stdout: each is parsed as the worker does; an accepted event
// travels on through an events frame (encode, decode, parse) as it would to the
// coordinator, which must take it: a frame the coordinator refuses would be resent
// after every reconnect and never acknowledged, so such an input stops the run.
inline void FuzzTrainerEvents(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::int64_t seq = 0;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    auto event = ParseTrainerEvent(text.substr(0, end), 64 * 1024);
    text.remove_prefix(std::min(end + 1, text.size()));
    if (!event.ok()) continue;
    EventsMessage message;
    message.events.push_back(TrialEvent{AttemptRef{1, 1}, 0, event->body, ++seq});
    message.outbox_seq = seq;
    auto frame = EncodeFrame(ToJson(message));
    if (!frame.ok()) continue;  // over the frame limit: the outbox splits or drops it
    FrameDecoder decoder;
    decoder.Append(*frame);
    auto decoded = decoder.Next();
    if (!decoded.ok() || !decoded->has_value()) {
      std::fprintf(stderr, "an accepted trainer event's frame does not decode: %s\n",
                   decoded.ok() ? "incomplete" : decoded.status().ToString().c_str());
      std::abort();
    }
    auto received = Parse<EventsMessage>(**decoded);
    if (!received.ok() || received->events.size() != 1) {
      std::fprintf(stderr, "an accepted trainer event's frame does not parse: %s\n",
                   received.ok() ? "not one event" : received.status().ToString().c_str());
      std::abort();
    }
    // The coordinator reads the event into its type again; what the worker accepted, it
    // must accept (it drops an event it cannot read).
    auto typed = TrainerEventFromJson(received->events[0].event);
    if (!typed.ok() || typed->kind != event->kind) {
      std::fprintf(stderr, "an accepted trainer event is refused on the receiving side: %s\n",
                   typed.ok() ? "kind changed" : typed.status().ToString().c_str());
      std::abort();
    }
  }
}

}  // namespace bakeoff::protocol
