import DownloadEngine
import DownloadModel
@testable import DownloadsService
import XCTest

/// NetworkManager's numbers as the engine takes them (NMState, NMConnectivityState, NMMetered).
final class NetworkStatusMappingTests: XCTestCase {
    func testStateConnectivityAndMeteredMapToOnlineAndMetered() {
        let cases: [(state: UInt32?, connectivity: UInt32?, metered: UInt32?, expected: NetworkStatus)] = [
            (70, 4, 2, NetworkStatus(online: true, metered: false)),  // connected, full, not metered
            (70, 4, 1, NetworkStatus(online: true, metered: true)),  // metered: yes
            (70, 4, 3, NetworkStatus(online: true, metered: true)),  // guess-yes
            (70, 4, 4, NetworkStatus(online: true, metered: false)),  // guess-no
            (70, 4, 0, NetworkStatus(online: true, metered: false)),  // unknown
            (20, 0, nil, NetworkStatus(online: false, metered: false)),  // disconnected
            (10, 4, nil, NetworkStatus(online: false, metered: false)),  // asleep
            (40, 0, nil, NetworkStatus(online: false, metered: false)),  // connecting
            (70, 1, nil, NetworkStatus(online: false, metered: false)),  // connectivity none
            (60, 2, nil, NetworkStatus(online: false, metered: false)),  // captive portal
            (60, 3, nil, NetworkStatus(online: true, metered: false)),  // limited: the local network answers
            (50, 0, nil, NetworkStatus(online: true, metered: false)),  // local only, checks disabled
            (nil, nil, nil, NetworkStatus()),  // nothing known
        ]
        for test in cases {
            XCTAssertEqual(
                NetworkMonitor.status(state: test.state, connectivity: test.connectivity, metered: test.metered),
                test.expected,
                "State \(test.state.map(String.init) ?? "-") Connectivity \(test.connectivity.map(String.init) ?? "-") Metered \(test.metered.map(String.init) ?? "-")"
            )
        }
    }
}
