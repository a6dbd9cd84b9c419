import Foundation
import LANShare
import TestSupport
import XCTest

/// Which interfaces are a LAN to share on: Ethernet and Wi-Fi and the loopback, not a VPN's tun
/// or tap, WireGuard, PPP or a mobile broadband modem (read from a sysfs laid out as the kernel's);
/// and which interface holds an address a client reached.
final class LANInterfacesTests: XCTestCase {
    func testEthernetWiFiAndTheLoopbackAreALANAndVPNsAndModemsAreNot() throws {
        let sysfs = try TemporaryDirectory(prefix: "sysfs")
        defer { sysfs.remove() }
        func interface(_ name: String, type: String, uevent: String = "", tunFlags: Bool = false) throws {
            let directory = sysfs.file(name)
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try (type + "\n").write(toFile: directory + "/type", atomically: true, encoding: .utf8)
            try uevent.write(toFile: directory + "/uevent", atomically: true, encoding: .utf8)
            if tunFlags { try "0x1002\n".write(toFile: directory + "/tun_flags", atomically: true, encoding: .utf8) }
        }
        try interface("eth0", type: "1", uevent: "INTERFACE=eth0\nIFINDEX=2\n")
        try interface("wlan0", type: "1", uevent: "DEVTYPE=wlan\nINTERFACE=wlan0\n")
        try interface("lo", type: "772")
        try interface("tun0", type: "65534", uevent: "INTERFACE=tun0\n", tunFlags: true)
        try interface("tap0", type: "1", uevent: "INTERFACE=tap0\n", tunFlags: true)
        try interface("wg0", type: "65534", uevent: "DEVTYPE=wireguard\n")
        try interface("ppp0", type: "512")
        try interface("wwan0", type: "1", uevent: "DEVTYPE=wwan\nINTERFACE=wwan0\n")
        try interface("wwp0s20", type: "519")
        for lan in ["eth0", "wlan0", "lo"] {
            XCTAssertTrue(LANInterfaces.isLAN(lan, sysfs: sysfs.path), lan)
        }
        for other in ["tun0", "tap0", "wg0", "ppp0", "wwan0", "wwp0s20", "missing", "", "../eth0"] {
            XCTAssertFalse(LANInterfaces.isLAN(other, sysfs: sysfs.path), other)
        }
    }

    func testAConnectionIsTakenOnlyOnAnAddressOfALAN() {
        XCTAssertEqual(LANInterfaces.interface(holding: "127.0.0.1"), "lo")
        XCTAssertEqual(
            LANInterfaces.interface(holding: "::ffff:127.0.0.1"), "lo", "an IPv4 address as a v6 socket gives it")
        XCTAssertTrue(LANInterfaces.acceptsConnection(to: "127.0.0.1"))
        XCTAssertFalse(LANInterfaces.acceptsConnection(to: "192.0.2.99"), "no interface of this machine holds it")
        XCTAssertFalse(LANInterfaces.indexes().contains(Int32(if_nametoindex("lo"))), "Avahi publishes nothing on lo")
    }
}
