/**
 * @brief The TCP echo protocol (docs/tcp-echo-protocol.md): 8-byte header, payload, codec, session.
 */
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace dbgkit::targets::echo {

/// Bytes of the fixed header: length (u32), type (u16), reserved (u16), all big-endian.
inline constexpr std::size_t kHeaderSize = 8;
/// The server's default maximum payload (--max-payload): 1 MiB.
inline constexpr std::uint32_t kDefaultMaxPayload = 1u << 20;
/// The largest --max-payload a server accepts: 64 MiB.
inline constexpr std::uint32_t kMaxMaxPayload = 64u << 20;

/// Message types. A client sends kRequest; the server answers each with one kReply.
enum class Type : std::uint16_t { kRequest = 1, kReply = 2 };

/// A decoded header.
struct Header {
    std::uint32_t length = 0;  ///< payload bytes that follow the header
    std::uint16_t type = 0;
    std::uint16_t reserved = 0;  ///< must be 0
};

namespace detail {

inline void put_u32(std::uint8_t* p, std::uint32_t v) {
    p[0] = static_cast<std::uint8_t>(v >> 24);
    p[1] = static_cast<std::uint8_t>(v >> 16);
    p[2] = static_cast<std::uint8_t>(v >> 8);
    p[3] = static_cast<std::uint8_t>(v);
}

inline void put_u16(std::uint8_t* p, std::uint16_t v) {
    p[0] = static_cast<std::uint8_t>(v >> 8);
    p[1] = static_cast<std::uint8_t>(v);
}

inline std::uint32_t get_u32(const std::uint8_t* p) {
    return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
           std::uint32_t{p[3]};
}

inline std::uint16_t get_u16(const std::uint8_t* p) {
    return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}

}  // namespace detail

/// Writes the header of a message of TYPE with LENGTH payload bytes into OUT[0..8). No allocation.
inline void encode_header(std::uint8_t* out, Type type, std::uint32_t length) {
    detail::put_u32(out, length);
    detail::put_u16(out + 4, static_cast<std::uint16_t>(type));
    detail::put_u16(out + 6, 0);
}

/// Reads a header from IN[0..8). No validation (see check_header).
inline Header decode_header(const std::uint8_t* in) {
    return Header{detail::get_u32(in), detail::get_u16(in + 4), detail::get_u16(in + 6)};
}

/// Appends one whole message (header and payload) to OUT.
inline void encode(std::vector<std::uint8_t>& out, Type type, const std::uint8_t* payload,
                   std::uint32_t length) {
    const std::size_t at = out.size();
    out.resize(at + kHeaderSize + length);
    encode_header(out.data() + at, type, length);
    if (length != 0) {
        std::memcpy(out.data() + at + kHeaderSize, payload, length);
    }
}

/// Why the server refuses a request header, or nullopt when it is a valid request.
inline std::optional<std::string> check_request(const Header& h, std::uint32_t max_payload) {
    char text[96];
    if (h.reserved != 0) {
        std::snprintf(text, sizeof text, "reserved header field is 0x%04x, not 0",
                      unsigned{h.reserved});
        return std::string(text);
    }
    if (h.type != static_cast<std::uint16_t>(Type::kRequest)) {
        std::snprintf(text, sizeof text, "unknown message type 0x%04x", unsigned{h.type});
        return std::string(text);
    }
    if (h.length > max_payload) {
        std::snprintf(text, sizeof text, "payload length %lu exceeds the maximum %lu",
                      static_cast<unsigned long>(h.length), static_cast<unsigned long>(max_payload));
        return std::string(text);
    }
    return std::nullopt;
}

/**
 * One peer's side of the protocol in a server: bytes read from the socket go in, replies come out.
 * Buffers are reused, so a steady exchange of same-sized messages allocates nothing. Not
 * thread-safe: one session belongs to one thread at a time.
 */
class Session {
public:
    explicit Session(std::uint32_t max_payload) : max_payload_(max_payload) {}

    /// Where the next read may write (at least 16 KiB, or the rest of a large message).
    std::uint8_t* read_space(std::size_t& room) {
        std::size_t want = in_len_ + kReadChunk;
        if (in_len_ >= kHeaderSize) {
            const Header h = decode_header(in_.data());
            if (h.length <= max_payload_) {
                want = std::max(want, kHeaderSize + std::size_t{h.length});
            }
        }
        if (in_.size() < want) {
            in_.resize(want);
        }
        room = in_.size() - in_len_;
        return in_.data() + in_len_;
    }

    /// Takes N bytes just read into read_space(); queues a reply per complete request. Returns why
    /// the peer must be dropped (a bad header), or nullopt.
    std::optional<std::string> commit(std::size_t n) {
        in_len_ += n;
        std::size_t pos = 0;
        while (in_len_ - pos >= kHeaderSize) {
            const Header h = decode_header(in_.data() + pos);
            if (auto why = check_request(h, max_payload_)) {
                return why;
            }
            if (in_len_ - pos < kHeaderSize + h.length) {
                break;
            }
            encode(out_, Type::kReply, in_.data() + pos + kHeaderSize, h.length);
            ++messages_;
            pos += kHeaderSize + h.length;
        }
        if (pos != 0) {
            std::memmove(in_.data(), in_.data() + pos, in_len_ - pos);
            in_len_ -= pos;
        }
        return std::nullopt;
    }

    /// Replies not yet written.
    const std::uint8_t* pending() const { return out_.data() + out_off_; }
    std::size_t pending_size() const { return out_.size() - out_off_; }
    /// Marks N pending bytes as written.
    void consumed(std::size_t n) {
        out_off_ += n;
        if (out_off_ == out_.size()) {
            out_.clear();
            out_off_ = 0;
        }
    }

    /// Bytes of an incomplete message held (0 between messages).
    std::size_t partial() const { return in_len_; }
    /// "5 of 8 header bytes" or "3 of 10 payload bytes": what a peer that left mid-message sent.
    std::string describe_partial() const {
        char text[96];
        if (in_len_ < kHeaderSize) {
            std::snprintf(text, sizeof text, "%zu of %zu header bytes", in_len_, kHeaderSize);
        } else {
            const Header h = decode_header(in_.data());
            std::snprintf(text, sizeof text, "%zu of %lu payload bytes", in_len_ - kHeaderSize,
                          static_cast<unsigned long>(h.length));
        }
        return text;
    }
    /// Requests answered so far.
    std::uint64_t messages() const { return messages_; }

private:
    static constexpr std::size_t kReadChunk = 16 * 1024;
    std::uint32_t max_payload_;
    std::vector<std::uint8_t> in_;
    std::size_t in_len_ = 0;
    std::vector<std::uint8_t> out_;
    std::size_t out_off_ = 0;
    std::uint64_t messages_ = 0;
};

}  // namespace dbgkit::targets::echo
