import Dispatch

/// The method calls a connection received as a server: how many of them are being handled now
/// (their handlers have not replied) and when the last one arrived. A service that exits when
/// idle reads it: a call in flight, or one that came within the idle time, keeps it.
public struct IncomingCalls: Sendable, Equatable {
    /// Calls whose handler runs (a reply is yet to be sent).
    public private(set) var inFlight = 0
    /// When the last call arrived (`DispatchTime` uptime nanoseconds; 0 before the first).
    public private(set) var lastArrival: UInt64 = 0

    public init() {}

    mutating func arrived(handled: Bool) {
        lastArrival = DispatchTime.now().uptimeNanoseconds
        if handled { inFlight += 1 }
    }

    mutating func answered() {
        inFlight -= 1
    }
}
