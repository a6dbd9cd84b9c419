@testable import DownloadModel
@testable import DownloadEngine
import Dispatch
import XCTest

/// A task is one allocation (its id and state the header of a buffer whose element is its lock)
/// and tasks share the locks that order their events (`EventOrderLocks`): the state is changed
/// by one thread at a time, the id reads at any time, tasks on one event-order lock do not hold
/// each other up beyond their bookkeeping, and a task goes with its last reference.
final class DownloadTaskTests: XCTestCase {
    func testTheStateChangesOneThreadAtATimeOnTasksSharingAnEventOrderLock() {
        // 1, 257 and 513 fall on one of EventOrderLocks' 256 locks.
        let tasks = [1, 257, 513, 2].map { DownloadTask(record: DownloadTaskRecord.plain($0)) }
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for round in 0..<5_000 {
                let task = tasks[(worker + round) % tasks.count]
                task.inEventOrder {
                    task.withState { $0.bytesWritten += 1 }
                }
                _ = task.snapshot
            }
        }
        XCTAssertEqual(tasks.map(\.id), [1, 257, 513, 2])
        XCTAssertEqual(tasks.map { $0.withState { $0.bytesWritten } }.reduce(0, +), 40_000)
        XCTAssertEqual(tasks.map { $0.record.id }, [1, 257, 513, 2])
    }

    func testATaskIsOneReferenceHoweverOftenItIsCopied() {
        let task = DownloadTask(record: DownloadTaskRecord.plain(9))
        let copy = task
        copy.withState { $0.record.validator = "\"v\"" }
        XCTAssertEqual(task.snapshot.record.validator, "\"v\"", "a copy of a task is the same task")
        XCTAssertEqual(MemoryLayout<DownloadTask>.size, MemoryLayout<UnsafeRawPointer>.size)
    }
}
