import Foundation
import TestSupport
import XCTest

/// The engine's lock list (the top of `Session/SessionManager.swift`) stays true: the number it
/// states is the number of locks the engine's sources declare, and every ordered lock it names
/// exists.
final class LockListTests: XCTestCase {
    func testTheLockListCountsEveryLockTheEngineDeclares() throws {
        let engine = PackageRoot.url.appendingPathComponent("Sources/DownloadEngine")
        let declaration = try NSRegularExpression(
            pattern:
                #"^\s*(private |fileprivate |public )?(let|var) \w+(: NIOLockedValueBox<[^=]*>)?\s*=?\s*(NIOLockedValueBox|NIOLock\(\))"#
        )
        var declared: [String] = []
        let files = FileManager.default.enumerator(at: engine, includingPropertiesForKeys: nil)
        while let file = files?.nextObject() as? URL {
            guard file.pathExtension == "swift" else { continue }
            let text = try String(contentsOf: file, encoding: .utf8)
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let line = String(line)
                // A typed box, an array of locks (`EventOrderLocks`: one lock of the list, shared),
                // or a class that is its own lock's buffer (`DownloadTask`).
                let typed =
                    ((line.contains(": NIOLockedValueBox<") || line.contains(": [NIOLock]"))
                        && (line.contains(" let ") || line.contains(" var ")))
                    || (line.contains(" class ") && line.contains("ManagedBuffer<")
                        && line.contains("pthread_mutex_t>"))
                if typed || declaration.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)) != nil {
                    declared.append("\(file.lastPathComponent):\(index + 1)")
                }
            }
        }
        let manager = try String(
            contentsOf: engine.appendingPathComponent("Session/SessionManager.swift"), encoding: .utf8)
        let stated = try XCTUnwrap(
            manager.firstMatch(of: /the one place it is written down: (\d+) of them/).map { Int($0.1) ?? -1 })
        XCTAssertEqual(declared.count, stated, "the list says \(stated); the engine declares: \(declared.sorted())")
        for name in [
            "DownloadTask.eventOrder", "SegmentTable", "TransferRun.segmentState", "SegmentWorkers",
            "PartialFileWriter.generation",
        ] {
            XCTAssertTrue(manager.contains("`\(name)"), "the list names \(name)")
        }
    }

    /// The seam between a run and its owner stays where it is drawn: outside Session/, no code
    /// runs a closure under a task's lock or takes its event order (a run reports `TaskChange`s
    /// and reads its task through the named operations of `DownloadTask+Run.swift`).
    func testNoCodeOutsideSessionReachesIntoATasksLockedState() throws {
        let engine = PackageRoot.url.appendingPathComponent("Sources/DownloadEngine")
        var reaching: [String] = []
        let files = FileManager.default.enumerator(at: engine, includingPropertiesForKeys: nil)
        while let file = files?.nextObject() as? URL {
            guard file.pathExtension == "swift", !file.path.contains("/Session/") else { continue }
            let text = try String(contentsOf: file, encoding: .utf8)
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where !line.trimmingCharacters(in: .whitespaces).hasPrefix("///")
                && (line.contains(".withState") || line.contains("task.update") || line.contains(".inEventOrder"))
            {
                reaching.append("\(file.lastPathComponent):\(index + 1)")
            }
        }
        XCTAssertEqual(reaching, [], "outside Session/, these reach into a task's locked state")
    }
}
