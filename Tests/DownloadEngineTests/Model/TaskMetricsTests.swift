import Foundation
import XCTest

@testable import DownloadModel

/// `TaskMetrics` as requests are added: every one counted, only the newest 50 kept, bytes given
/// to their source, the first byte taken from the first response that brought any; and stored
/// as JSON, older records without the connection fields read back as they were.
final class TaskMetricsTests: XCTestCase {
    func transaction(_ n: Int, status: Int = 200, bytes: Int64 = 0) -> TransactionMetrics {
        TransactionMetrics(
            url: "http://h/\(n)", source: "url", range: "", protocol: "http/1.1", status: status, remoteAddress: nil,
            fetchStart: Int64(n) * 10, lookupStart: nil, lookupEnd: nil, requestStart: Int64(n) * 10 + 1,
            responseStart: Int64(n) * 10 + 2, responseEnd: Int64(n) * 10 + 3, bytesSent: 0, bytesReceived: bytes,
            error: "", reusedConnection: n > 0, connectEnd: n == 0 ? 1 : nil)
    }

    func testARedirectLoopKeepsTheNewestFiftyAndCountsThemAll() {
        var metrics = TaskMetrics(startedAt: 0)
        for n in 0..<60 { metrics.add(transaction(n, status: 302), from: "http://h/0") }
        metrics.add(transaction(60, bytes: 500), from: "http://h/0")
        XCTAssertEqual(metrics.attempts, 61)
        XCTAssertEqual(metrics.redirects, 60)
        XCTAssertEqual(metrics.transactions.count, TaskMetrics.kept)
        XCTAssertEqual(metrics.transactions.first?.url, "http://h/11", "the oldest dropped first")
        XCTAssertEqual(metrics.transactions.last?.url, "http://h/60")
        XCTAssertEqual(metrics.bytesBySource, ["http://h/0": 500])
        XCTAssertEqual(metrics.firstByteAt, 602, "the response that brought the first body bytes")
    }

    func testStoredAndReadBackIncludingRecordsWrittenBeforeConnectionFields() throws {
        var metrics = TaskMetrics(startedAt: 5)
        metrics.add(transaction(0, bytes: 10), from: "http://h/0")
        metrics.add(transaction(1, bytes: 10), from: "http://h/0")
        let data = try JSONEncoder().encode(metrics)
        XCTAssertEqual(try JSONDecoder().decode(TaskMetrics.self, from: data), metrics)
        let older = """
            {"started_at":5,"attempts":1,"redirects":0,"restarts":0,"bytes_by_source":{},"transactions":[
            {"url":"http://h/0","source":"url","range":"","protocol":"http/1.1","status":200,"fetch_start":1,
            "response_end":2,"bytes_sent":0,"bytes_received":0,"error":""}]}
            """
        let read = try JSONDecoder().decode(TaskMetrics.self, from: Data(older.utf8))
        XCTAssertNil(read.transactions.first?.reusedConnection)
        XCTAssertNil(read.transactions.first?.tlsEnd)
    }
}
