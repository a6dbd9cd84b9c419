import Crypto
@testable import DownloadModel
@testable import DownloadEngine
import Foundation
import ProxyRules
import XCTest

/// Proxy URLs as callers and environments write them, curl's `no_proxy` rules, and which
/// environment variable applies to which URL.
final class ProxySettingTests: XCTestCase {
    func testProxyURLsParseAsCurlReadsThem() throws {
        XCTAssertEqual(
            try ProxySetting.parse("http://proxy.example:3128"),
            .http(host: "proxy.example", port: 3128, credentials: nil))
        XCTAssertEqual(
            try ProxySetting.parse("proxy.example:3128"), .http(host: "proxy.example", port: 3128, credentials: nil),
            "a bare host:port is an HTTP proxy")
        XCTAssertEqual(
            try ProxySetting.parse("HTTP://Proxy.Example/"), .http(host: "proxy.example", port: 1080, credentials: nil),
            "curl's default port; scheme and host case-insensitive; a trailing slash is fine")
        XCTAssertEqual(try ProxySetting.parse("http://[::1]:8080"), .http(host: "::1", port: 8080, credentials: nil))
        XCTAssertEqual(
            try ProxySetting.parse("socks5://127.0.0.1:1080"),
            .socks5(host: "127.0.0.1", port: 1080, resolvesNames: false))
        XCTAssertEqual(
            try ProxySetting.parse("socks5h://gate:9050"), .socks5(host: "gate", port: 9050, resolvesNames: true))
        XCTAssertEqual(try ProxySetting.parse("direct://"), .direct)
        let withPassword = try ProxySetting.parse("http://al%40ice:p%3Ass:w@proxy:3128")
        XCTAssertEqual(
            withPassword, .http(host: "proxy", port: 3128, credentials: .init(user: "al@ice", password: "p:ss:w")),
            "user and password percent-decoded; the password may hold colons")
        XCTAssertEqual(withPassword.description, "http://proxy:3128", "messages and logs never show credentials")
        XCTAssertEqual(
            try ProxySetting.parse(withPassword.text), withPassword, "the stored text reads back to the same proxy")
        XCTAssertFalse(withPassword.text.contains("p:ss"), "the stored form is percent-encoded")
    }

    func testWhatIsNotAProxyIsRefusedWithAReasonAndNeverEchoesAPassword() {
        for (text, reason) in [
            ("https://proxy:443", "https://"), ("ftp://proxy:21", "unknown scheme"), ("http://proxy:0", "port"),
            ("http://proxy:99999", "port"), ("http://proxy:80/path", "no path"), ("http://pro xy:80", "spaces"),
            ("socks5://user:pw@proxy:1080", "SOCKS5 with a user name"), ("http://:pw@proxy:80", "user name is empty"),
            ("http://proxy:8a", "port"), ("direct://x", "direct://"), ("http://", "host"),
            ("http://bad%zz@proxy:1", "%-escape"),
            // C1 (a terminal's CSI) in the scheme an error would repeat and in a password, DEL, a
            // no-break space: refused as the URL of a download is.
            ("\u{9B}31m://proxy:1", "control characters"), ("http://u:p\u{9B}w@proxy:1", "control characters"),
            ("http://proxy\u{7F}:1", "control characters"), ("http://proxy\u{A0}:1", "control characters"),
        ] {
            XCTAssertThrowsError(try ProxySetting.parse(text), text) { error in
                let error = error as? ProxySetting.Invalid
                XCTAssertNotNil(error, text)
                XCTAssertTrue(error?.message.contains(reason) == true, "\(text): \(error?.message ?? "")")
                XCTAssertFalse(error?.message.contains("pw") == true, "\(text): the password is not repeated")
            }
        }
    }

    func testNoProxyFollowsCurlsRulesAndPorts() {
        let list = NoProxyList(
            " example.com, .internal.test ,10.0.0.0/8, 192.168.1.5, [fd00::1], local.test:8080, ::1 ")
        XCTAssertTrue(list.matches(host: "example.com", port: 80))
        XCTAssertTrue(list.matches(host: "www.Example.COM", port: 443), "a name and every name below it, any case")
        XCTAssertFalse(list.matches(host: "badexample.com", port: 80), "a suffix must end at a dot")
        XCTAssertTrue(list.matches(host: "a.internal.test", port: 80), "a leading dot is ignored")
        XCTAssertTrue(list.matches(host: "internal.test", port: 80))
        XCTAssertTrue(list.matches(host: "10.20.30.40", port: 80), "a CIDR range")
        XCTAssertFalse(list.matches(host: "11.0.0.1", port: 80))
        XCTAssertTrue(list.matches(host: "192.168.1.5", port: 80))
        XCTAssertFalse(list.matches(host: "192.168.1.6", port: 80))
        XCTAssertTrue(list.matches(host: "[fd00::1]", port: 80), "IPv6 with or without brackets")
        XCTAssertTrue(list.matches(host: "::1", port: 80))
        XCTAssertTrue(list.matches(host: "local.test", port: 8080))
        XCTAssertFalse(list.matches(host: "local.test", port: 80), "an entry with a port matches that port only")
        XCTAssertFalse(list.matches(host: "10.0.0.1.example.org", port: 80), "a name is not an address")
        XCTAssertTrue(NoProxyList("*").matches(host: "anything.example", port: 1))
        XCTAssertTrue(NoProxyList("").isEmpty)
        XCTAssertFalse(NoProxyList("").matches(host: "example.com", port: 80))
    }

    func testTheEnvironmentGivesEachSchemeItsProxyAsCurlDoes() throws {
        let environment = ProxyEnvironment([
            "http_proxy": "http://h:1", "HTTP_PROXY": "http://ignored:9", "HTTPS_PROXY": "http://s:2",
            "ALL_PROXY": "socks5h://a:3", "no_proxy": "direct.test",
        ])
        XCTAssertEqual(
            environment.proxy(scheme: "http", host: "x.test", port: 80), try ProxySetting.parse("http://h:1"))
        XCTAssertEqual(
            environment.proxy(scheme: "https", host: "x.test", port: 443), try ProxySetting.parse("http://s:2"),
            "HTTPS_PROXY is read in either case")
        XCTAssertNil(environment.proxy(scheme: "https", host: "www.direct.test", port: 443), "no_proxy")
        let upperOnly = ProxyEnvironment(["HTTP_PROXY": "http://cgi:9", "all_proxy": "socks5://a:3"])
        XCTAssertEqual(
            upperOnly.proxy(scheme: "http", host: "x.test", port: 80), try ProxySetting.parse("socks5://a:3"),
            "upper-case HTTP_PROXY is not read (httpoxy); all_proxy applies")
        let broken = ProxyEnvironment(["https_proxy": "https://tls-proxy:443", "http_proxy": "http://user:hunter2@:80"])
        XCTAssertNil(broken.proxy(scheme: "https", host: "x.test", port: 443))
        XCTAssertNil(broken.proxy(scheme: "http", host: "x.test", port: 80))
        XCTAssertEqual(broken.problems.count, 2)
        XCTAssertFalse(broken.problems.joined().contains("hunter2"), "a problem never repeats a password")
        XCTAssertNil(ProxyEnvironment([:]).proxy(scheme: "http", host: "x.test", port: 80))
        let own = try ProxySetting.parse("socks5h://own:9050")
        XCTAssertEqual(
            environment.proxy(own: own, scheme: "http", host: "direct.test", port: 80), own,
            "a task's own proxy comes first")
        XCTAssertNil(environment.proxy(own: .direct, scheme: "http", host: "x.test", port: 80), "direct:// is none")
        XCTAssertEqual(environment.proxy(own: nil, scheme: "http", host: "x.test", port: 80), environment.http)
    }

    func testTheProxyOptionIsStoredWithItsCredentialsAndSealedInResumeData() throws {
        var options = DownloadOptions()
        options.proxy = try ProxySetting.parse("http://alice:s3cret@proxy.test:3128")
        let stored = try JSONEncoder().encode(options)
        XCTAssertEqual(try JSONDecoder().decode(DownloadOptions.self, from: stored).proxy, options.proxy)
        let record = DownloadTaskRecord(
            id: 7, owner: 1000, session: "default", url: "http://example.test/f", destination: "/tmp/f",
            destinationIsDirectory: false, options: options, durableOffset: 10, expectedLength: 100, validator: "\"v\""
        )
        let key = SymmetricKey(size: .bits256)
        let blob = try ResumeData(record: record).encoded(key: key)
        let text = String(decoding: blob, as: UTF8.self)
        XCTAssertFalse(text.contains("s3cret"), "the password is not in the blob in clear")
        XCTAssertFalse(text.contains("proxy.test"), "nor the proxy at all")
        XCTAssertEqual(try ResumeData.decode(blob, key: key, owner: 1000).options.proxy, options.proxy)
    }
}
