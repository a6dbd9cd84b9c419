import AptMethod
import Foundation
import NIOConcurrencyHelpers

/// The method's standard output, where apt reads its messages: one whole message at a time.
final class MethodOutput: Sendable {
    private let lock = NIOLock()

    func send(_ message: AptMessage) {
        let bytes = Array(message.text.utf8)
        lock.withLock {
            var offset = 0
            while offset < bytes.count {
                let written = bytes[offset...].withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
                if written < 0 {
                    if errno == EINTR { continue }
                    // apt went away: nothing to tell it.
                    return
                }
                offset += written
            }
        }
    }

    func status(_ uri: String, _ text: String) {
        send(AptMessage(102, "Status", [.init("URI", uri), .init("Message", text)]))
    }

    func failure(_ uri: String, _ text: String, reason: String? = nil, transient: Bool = false) {
        send(Self.failure(uri, text, reason: reason, transient: transient))
    }

    /// `400 URI Failure` with apt's `FailReason` and `Transient-Failure` where given.
    static func failure(_ uri: String, _ text: String, reason: String? = nil, transient: Bool = false) -> AptMessage {
        var fields: [AptMessage.Field] = [.init("URI", uri), .init("Message", text)]
        if let reason { fields.append(.init("FailReason", reason)) }
        if transient { fields.append(.init("Transient-Failure", "true")) }
        return AptMessage(400, "URI Failure", fields)
    }
}
