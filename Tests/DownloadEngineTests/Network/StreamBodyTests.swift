import NIOCore
import NIOEmbedded
import NIOHTTP2
import XCTest

@testable import DownloadEngine

/// `StreamBody` joins a read's DATA frames into parts of at most a size, hands them on at the
/// read's end, before any other frame and with the stream's last, and loses no byte or order.
final class StreamBodyTests: XCTestCase {
    private func data(_ bytes: [UInt8], end: Bool = false) -> HTTP2Frame.FramePayload {
        .data(.init(data: .byteBuffer(ByteBuffer(bytes: bytes)), endStream: end))
    }

    /// (bytes, END_STREAM) of each DATA part handed on, and "other" for anything else.
    private func handedOn(_ channel: EmbeddedChannel) throws -> [String] {
        var parts: [String] = []
        while let payload = try channel.readInbound(as: HTTP2Frame.FramePayload.self) {
            guard case .data(let frame) = payload, case .byteBuffer(let bytes) = frame.data else {
                parts.append("other")
                continue
            }
            parts.append("\(Array(bytes.readableBytesView))\(frame.endStream ? " end" : "")")
        }
        return parts
    }

    func testAReadsFramesGoOnAsPartsOfAtMostTheSizeInOrder() throws {
        let channel = EmbeddedChannel(handler: StreamBody(largest: 4))
        defer { _ = try? channel.finish() }
        // One read of five frames: joined up to 4 bytes, the rest at the read's end.
        for bytes: [UInt8] in [[1], [2], [3, 4], [5], [6]] { channel.pipeline.fireChannelRead(NIOAny(data(bytes))) }
        XCTAssertEqual(try handedOn(channel), ["[1, 2, 3, 4]"], "a full part goes at once")
        channel.pipeline.fireChannelReadComplete()
        XCTAssertEqual(try handedOn(channel), ["[5, 6]"], "the rest at the read's end")
        // Another frame (trailers, a reset) is never overtaken by the body before it.
        channel.pipeline.fireChannelRead(NIOAny(data([7])))
        channel.pipeline.fireChannelRead(NIOAny(HTTP2Frame.FramePayload.headers(.init(headers: ["x": "y"]))))
        XCTAssertEqual(try handedOn(channel), ["[7]", "other"])
        // The stream's last frame takes what is held with it, END_STREAM kept.
        channel.pipeline.fireChannelRead(NIOAny(data([8])))
        channel.pipeline.fireChannelRead(NIOAny(data([9], end: true)))
        XCTAssertEqual(try handedOn(channel), ["[8, 9] end"])
        // A stream that closes mid-read hands on what it held.
        channel.pipeline.fireChannelRead(NIOAny(data([10])))
        channel.pipeline.fireChannelInactive()
        XCTAssertEqual(try handedOn(channel), ["[10]"])
    }
}
