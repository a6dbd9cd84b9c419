import Foundation
import TestSupport
import XCTest

/// The counts docs/architecture.md states of the engine's seams stay what the tree has, as
/// `LockListTests` keeps the lock list: the requirements of `TransferRunOwner` and
/// `ConnectionLender`, the Session/, Transfer/ and Upload/ types Network/ names, the reads of a
/// task's locked state outside Session/, the locks, and the length of `RequestSender.exchange`.
final class ArchitectureCountsTests: XCTestCase {
    let engine = PackageRoot.url.appendingPathComponent("Sources/DownloadEngine")

    func text(_ path: String) throws -> String {
        try String(contentsOf: engine.appendingPathComponent(path), encoding: .utf8)
    }

    var architecture: String {
        get throws {
            try String(
                contentsOf: PackageRoot.url.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        }
    }

    /// The "after" column of the third step's row that starts with `row`: its first number.
    func stated(_ row: String) throws -> [Int] {
        let line = try XCTUnwrap(
            architecture.split(separator: "\n").first { $0.hasPrefix("| \(row) |") }, "no row \(row)")
        let after = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }[2]
        return after.matches(of: /\d+/).prefix(2).compactMap { Int($0.output) }
    }

    /// The lines of swift files below `folders` that are not comments, with their file names.
    func lines(below folders: [String]) throws -> [(file: String, line: String)] {
        var found: [(String, String)] = []
        for folder in folders {
            let files = FileManager.default.enumerator(
                at: engine.appendingPathComponent(folder), includingPropertiesForKeys: nil)
            while let file = files?.nextObject() as? URL {
                guard file.pathExtension == "swift" else { continue }
                for line in try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
                where !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") {
                    found.append((file.lastPathComponent, String(line)))
                }
            }
        }
        return found
    }

    /// Requirements of a protocol: its body's `func` and `var` lines.
    func requirements(of name: String, in path: String) throws -> Int {
        let source = try text(path)
        let start = try XCTUnwrap(source.range(of: "protocol \(name):"))
        let end = try XCTUnwrap(source[start.upperBound...].range(of: "\n}\n"))
        let declaration = source[start.upperBound..<end.lowerBound]
        return declaration.split(separator: "\n").filter {
            $0.hasPrefix("    func ") || $0.hasPrefix("    var ")
        }.count
    }

    func testTheRunsOwnerAndTheLenderHaveTheRequirementsTheDocumentationStates() throws {
        let owner = try requirements(of: "TransferRunOwner", in: "Transfer/TransferRunOwner.swift")
        let lender = try requirements(of: "ConnectionLender", in: "Network/ConnectionLender.swift")
        XCTAssertEqual(try stated("requirements of `TransferRunOwner` + `ConnectionLender`"), [owner, lender])
        let question = try XCTUnwrap(
            architecture.firstMatch(of: /TransferRunOwner.swift`: (\d+) requirements \(and `ConnectionLender`'s (\d+)/))
        XCTAssertEqual([Int(question.1), Int(question.2)], [owner, lender])
    }

    func testNetworkNamesNoTypeOfTheLayersAboveIt() throws {
        let above = [
            "SessionManager", "DownloadTask", "TaskChange", "TransferRun", "TransferDelegate", "UploadRun",
            "UploadDelegate", "SegmentWorkers", "SegmentTable", "MirrorSet", "TaskTable", "AnswerBook",
        ]
        let naming = try lines(below: ["Network"]).filter { entry in
            !entry.line.trimmingCharacters(in: .whitespaces).hasPrefix("///")
                && above.contains { entry.line.contains($0) }
        }
        XCTAssertEqual(
            naming.count, try stated("names of Session/, Transfer/ or Upload/ types in Network/ (comments aside)").first
        )
        XCTAssertEqual(naming.map { "\($0.file): \($0.line)" }, [])
    }

    func testTheReadsOfATasksStateOutsideSessionAreTheStatedNumber() throws {
        let read =
            /\btask\.(record|snapshot|stopReason|position|heldSource|maxBytesPerSecond|io|runRequests|wrote|takeProgress|onIOQueue|runStart)\b/
            .wordBoundaryKind(.simple)
        let reads = try lines(below: ["Transfer", "Upload", "Network", "Files"]).filter {
            !$0.line.trimmingCharacters(in: .whitespaces).hasPrefix("///")
        }.map { $0.line.matches(of: read).count }.reduce(0, +)
        XCTAssertEqual(
            reads,
            try stated("reads of a task's locked state from Transfer/, Upload/, Network/, Files/").first)
        let network = try lines(below: ["Network"]).filter { !$0.line.matches(of: read).isEmpty }
        XCTAssertEqual(network.map(\.line), [], "Network/ reads no task")
    }

    func testTheLocksAndTheExchangeAreAsLongAsStated() throws {
        let manager = try text("Session/SessionManager.swift")
        let locks = try XCTUnwrap(
            manager.firstMatch(of: /the one place it is written down: (\d+) of them/).map { Int($0.1) })
        XCTAssertEqual(try stated("locks of the engine").first, locks)
        let sender = try text("Network/RequestSender.swift").split(separator: "\n", omittingEmptySubsequences: false)
        let start = try XCTUnwrap(sender.firstIndex { $0.contains("func exchange<") })
        let end = try XCTUnwrap(sender[start...].firstIndex { $0 == "    }" })
        XCTAssertEqual(end - start + 1, try stated("lines of `RequestSender.exchange`").first)
    }
}
