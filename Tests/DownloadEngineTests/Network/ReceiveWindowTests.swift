import NIOCore
import NIOEmbedded
import NIOHTTP2
import XCTest

@testable import DownloadEngine

/// `ReceiveWindow` gives the server back what passed, a quantum at a time at the end of a read,
/// on the connection (stream 0) or on its stream, and passes every frame on unchanged.
final class ReceiveWindowTests: XCTestCase {
    private func data(_ count: Int, stream: HTTP2StreamID = 1, padding: Int? = nil) -> HTTP2Frame {
        HTTP2Frame(
            streamID: stream,
            payload: .data(.init(data: .byteBuffer(ByteBuffer(repeating: 7, count: count)), paddingBytes: padding)))
    }

    private func increments(_ channel: EmbeddedChannel) throws -> [Int] {
        var found: [Int] = []
        while let frame = try channel.readOutbound(as: HTTP2Frame.self) {
            XCTAssertEqual(frame.streamID, .rootStream, "only the connection's window is given back")
            guard case .windowUpdate(let increment) = frame.payload else {
                XCTFail("not a WINDOW_UPDATE: \(frame.payload)")
                continue
            }
            found.append(increment)
        }
        return found
    }

    func testWhatEveryStreamReceivedGoesBackToTheConnectionAQuantumAtATime() throws {
        let channel = EmbeddedChannel(handler: ReceiveWindow.connection(quantum: 100))
        defer { _ = try? channel.finish() }
        // `writeInbound` is a read and its end (channelRead, channelReadComplete).
        try channel.writeInbound(data(60))
        XCTAssertEqual(try increments(channel), [], "less than a quantum is kept")
        // Padding counts as flow control counts it: the bytes and their length byte (9 + 1).
        try channel.writeInbound(data(30, stream: 3, padding: 9))
        XCTAssertEqual(try increments(channel), [100])
        try channel.writeInbound(data(250))
        XCTAssertEqual(try increments(channel), [250], "a frame larger than a quantum goes back whole")
        // Within one read nothing is written: the frames of the read go back together at its end.
        channel.pipeline.fireChannelRead(NIOAny(data(70)))
        channel.pipeline.fireChannelRead(NIOAny(data(70)))
        XCTAssertEqual(try increments(channel), [], "not while the read hands frames on")
        channel.pipeline.fireChannelReadComplete()
        XCTAssertEqual(try increments(channel), [140])
        try channel.writeInbound(HTTP2Frame(streamID: 1, payload: .headers(.init(headers: [":status": "200"]))))
        try channel.writeInbound(HTTP2Frame(streamID: .rootStream, payload: .ping(HTTP2PingData(), ack: false)))
        XCTAssertEqual(try increments(channel), [], "only DATA counts")
        // Every frame went on to the multiplexer as it came.
        var passed: [HTTP2StreamID] = []
        while let frame = try channel.readInbound(as: HTTP2Frame.self) { passed.append(frame.streamID) }
        XCTAssertEqual(passed, [1, 3, 1, 1, 1, 1, .rootStream])
    }

    func testOnAStreamWhatItsReaderTookGoesBackOnTheStream() throws {
        let channel = EmbeddedChannel(handler: ReceiveWindow.stream(quantum: 100))
        defer { _ = try? channel.finish() }
        let body = HTTP2Frame.FramePayload.data(.init(data: .byteBuffer(ByteBuffer(repeating: 1, count: 120))))
        try channel.writeInbound(body)
        let update = try XCTUnwrap(try channel.readOutbound(as: HTTP2Frame.FramePayload.self))
        guard case .windowUpdate(let increment) = update else { return XCTFail("\(update)") }
        XCTAssertEqual(increment, 120)
        XCTAssertNotNil(try channel.readInbound(as: HTTP2Frame.FramePayload.self), "passed on")
    }
}
