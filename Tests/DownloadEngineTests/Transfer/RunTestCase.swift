@testable import DownloadEngine
@testable import DownloadModel
import TestHTTPServer
import TestSupport
import XCTest

/// What `TransferRunTests` and `UploadRunTests` share: a local server, a directory, an observer
/// and the fake owner (`FakeRunOwner`) a run reaches instead of a manager, made for each test
/// and stopped after it.
class RunTestCase: XCTestCase {
    var server: TestHTTPServer!
    var directory: TemporaryDirectory!
    var observer: RecordingObserver!
    var owner: FakeRunOwner!

    override func setUp() async throws {
        server = try TestHTTPServer()
        directory = try TemporaryDirectory(prefix: "run-test")
        observer = RecordingObserver()
        owner = FakeRunOwner(observer: observer)
    }

    override func tearDown() async throws {
        await owner?.shutdown()
        server?.stop()
        directory?.remove()
    }

    /// Gives the test an owner with other settings (the one made in `setUp` is shut down).
    func useOwner(_ change: @escaping (inout SessionManager.Configuration) -> Void) async {
        await owner.shutdown()
        owner = FakeRunOwner(observer: observer, change)
    }
}
