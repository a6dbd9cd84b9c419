import Foundation

/// Certificates for TLS tests, made with openssl in a directory: a test CA (`caFile`, what the
/// daemon gets as `--ca-file`, or what `update-ca-certificates` would add) and, each with the key
/// `serverKey`, server certificates that are good (localhost, 127.0.0.1, ::1), issued by a CA
/// nobody trusts, self-signed, expired in 2020, and issued for another host name.
public struct TestCertificates: Sendable {
    public let directory: String
    public var caFile: String { directory + "/ca.pem" }
    public var serverKey: String { directory + "/server.key" }
    public var good: String { directory + "/good.pem" }
    public var untrusted: String { directory + "/untrusted.pem" }
    public var selfSigned: String { directory + "/self-signed.pem" }
    public var expired: String { directory + "/expired.pem" }
    public var otherHost: String { directory + "/other-host.pem" }
    /// A client's certificate from the test CA and its key in one PEM file, as `client_certificate` takes it.
    public var client: String { directory + "/client-bundle.pem" }
    /// The same with its key encrypted under `clientPassphrase`.
    public var clientEncrypted: String { directory + "/client-encrypted.pem" }
    public static let clientPassphrase = "s3cret-Phrase-9"

    /// Makes every file in `directory` (which must exist).
    public init(in directory: String) throws {
        self.directory = directory
        let script = #"""
            set -e
            cd "$1"
            key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
            key ca.key; key untrusted-ca.key; key server.key
            openssl req -x509 -new -key ca.key -out ca.pem -days 3 -subj "/CN=Downloads Test CA/O=org.example.Downloads tests"
            openssl req -x509 -new -key untrusted-ca.key -out untrusted-ca.pem -days 3 -subj "/CN=Untrusted Test CA"
            openssl req -new -key server.key -out server.csr -subj "/CN=localhost"
            printf 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nextendedKeyUsage=serverAuth\n' > good.ext
            printf 'subjectAltName=DNS:other.example\nextendedKeyUsage=serverAuth\n' > other.ext
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 3 -extfile good.ext -out good.pem 2>/dev/null
            openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 3 -extfile other.ext -out other-host.pem 2>/dev/null
            openssl x509 -req -in server.csr -CA untrusted-ca.pem -CAkey untrusted-ca.key -CAcreateserial -days 3 -extfile good.ext -out untrusted.pem 2>/dev/null
            openssl x509 -req -in server.csr -key server.key -days 3 -extfile good.ext -out self-signed.pem 2>/dev/null
            key client.key
            openssl req -new -key client.key -out client.csr -subj "/CN=Downloads Test Client"
            printf 'extendedKeyUsage=clientAuth\n' > client.ext
            openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 3 -extfile client.ext -out client.pem 2>/dev/null
            cat client.pem client.key > client-bundle.pem
            openssl pkey -in client.key -aes256 -passout pass:s3cret-Phrase-9 -out client-encrypted.key
            cat client.pem client-encrypted.key > client-encrypted.pem
            # Expired: only `openssl ca` takes a start and end date.
            mkdir -p db; : > db/index.txt; echo 1000 > db/serial
            cat > ca.cnf <<CONF
            [ca]
            default_ca = test
            [test]
            database = db/index.txt
            new_certs_dir = db
            serial = db/serial
            default_md = sha256
            policy = any
            [any]
            commonName = supplied
            CONF
            openssl ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in server.csr -out expired.pem -notext \
                -startdate 20200101000000Z -enddate 20200102000000Z -extfile good.ext 2>/dev/null
            """#
        let output = try ProcessRunner.runBlocking(["/bin/sh", "-c", script, "sh", directory], timeout: 60)
        guard output.status == 0 else {
            throw POSIXError(.EIO, userInfo: [NSLocalizedDescriptionKey: "openssl failed: \(output)"])
        }
    }
}
