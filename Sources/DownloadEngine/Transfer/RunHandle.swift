/// What the manager may ask of a running transfer, and nothing more (as AsyncHTTPClient's pool
/// reaches a request only through `HTTPSchedulableRequest`): a checkpoint before the machine
/// sleeps, and connections added or shed as the scheduler's places change. A run hands itself
/// over with `TaskChange.running` and takes itself back with `TaskChange.runEnded`.
protocol RunHandle: AnyObject, Sendable {
    /// Makes what the run wrote durable now (fdatasync, then recorded), without stopping it.
    func checkpoint() async
    /// Takes up to `count` more places; returns how many it took.
    func addConnections(_ count: Int) -> Int
    /// Gives back up to `count` places as its connections end; returns how many will end.
    func shedConnections(_ count: Int) -> Int
}
