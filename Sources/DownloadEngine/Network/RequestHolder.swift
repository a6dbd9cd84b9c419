/// Whatever may take a request back while it is out (a segmented download's connection seat,
/// `SegmentWorkers.Seat`, when the scheduler retires it): given the request's cancel while it
/// is out, nil once it ended.
protocol RequestHolder: Sendable {
    func holds(_ cancel: (@Sendable () -> Void)?)
}
