import Foundation
import TestSupport
import XCTest

/// What a task holds under its lock stays what its documentation says, as `LockListTests` keeps
/// the lock list: the number `DownloadTask.State` states is the number of its fields (its record,
/// `waitingFor`, and the stored fields of `TaskRunState`, which it reaches through accessors),
/// and docs/architecture.md states the same number.
final class TaskStateFieldsTests: XCTestCase {
    func testTheStatedNumberOfATasksFieldsIsItsFields() throws {
        let session = PackageRoot.url.appendingPathComponent("Sources/DownloadEngine/Session")
        let task = try String(contentsOf: session.appendingPathComponent("DownloadTask.swift"), encoding: .utf8)
        let run = try String(contentsOf: session.appendingPathComponent("TaskRunState.swift"), encoding: .utf8)
        let runFields = run.split(separator: "\n").filter { $0.hasPrefix("    var ") }
        // The State's own stored fields besides the one that holds `TaskRunState`.
        let ownFields = ["var record: DownloadTaskRecord", "var waitingFor: WaitingFor"]
        for field in ownFields { XCTAssertTrue(task.contains(field), field) }
        let counted = runFields.count + ownFields.count
        let stated = try XCTUnwrap(
            task.firstMatch(of: /What a task holds under its lock: (\d+) fields/).map { Int($0.1) ?? -1 })
        XCTAssertEqual(counted, stated, "DownloadTask.State says \(stated); it has \(counted)")
        let architecture = try String(
            contentsOf: PackageRoot.url.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        let documented = try XCTUnwrap(
            architecture.firstMatch(of: /`DownloadTask\.State` holds (\d+) fields/).map { Int($0.1) ?? -1 })
        XCTAssertEqual(documented, counted, "docs/architecture.md says \(documented)")
    }
}
