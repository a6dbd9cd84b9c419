/// How many `StartAt` calls the method has out at once. The service answers a user's calls that
/// touch files only while few of them are pending (a hung mount must not take its threads):
/// apt pipelines dozens of items at once, so their starts go a few at a time (each is quick;
/// the transfers themselves then run side by side as the service's limits allow).
actor StartGate {
    private let width: Int
    private var out = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(width: Int) {
        self.width = max(1, width)
    }

    func enter() async {
        if out < width {
            out += 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func leave() {
        if waiting.isEmpty {
            out -= 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}
