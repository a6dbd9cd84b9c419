import DBus
import Foundation
import TestSupport
import XCTest

/// The system trust store, with no option: the daemon runs in a mount namespace of its own in
/// which the test CA was added the Debian way (a .crt in /usr/local/share/ca-certificates, then
/// update-ca-certificates, which rewrites /etc/ssl/certs/ca-certificates.crt). Nothing of that is
/// seen outside the namespace, and the machine's store is left as it was.
final class SystemTrustStoreTests: TLSDaemonTestCase {
    override var launcher: [String] {
        let work = tlsDirectory.file("system-store")
        let script = """
            set -e
            mkdir -p "\(work)/local"
            cp -a /etc/ssl/certs "\(work)/certs"
            mount --bind "\(work)/certs" /etc/ssl/certs
            mount --bind "\(work)/local" /usr/local/share/ca-certificates
            cp "\(tls.certificates.caFile)" /usr/local/share/ca-certificates/downloads-test-ca.crt
            update-ca-certificates --hooksdir "\(work)/no-hooks" >/dev/null
            exec "$@"
            """
        return ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script, "sh"]
    }

    func testACAAddedWithUpdateCACertificatesIsTrustedWithNoOption() async throws {
        let content = Self.content(100_000, seed: 9)
        try tls.file("trusted.bin", content)
        try await download(tls.url(.http2, "/trusted.bin"), to: directory.file("trusted.bin"), expecting: content)
        // The store outside the namespace is untouched.
        let bundle = try String(contentsOfFile: "/etc/ssl/certs/ca-certificates.crt", encoding: .utf8)
        let ours = try String(contentsOfFile: tls.certificates.caFile, encoding: .utf8)
        XCTAssertFalse(bundle.contains(ours.split(separator: "\n")[1]))
        // A certificate of a CA that was not added still fails.
        let untrusted = try await start(tls.url(.untrusted, "/trusted.bin"), directory.file("untrusted.bin"))
        let state = try await waitState(untrusted, ["finished", "failed"])
        XCTAssertEqual(state, "failed")
    }
}
