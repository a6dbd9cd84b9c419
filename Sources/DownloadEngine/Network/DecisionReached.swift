/// What a response's receiver ends its request with when the head was enough (a redirect, a 416,
/// an error status): `RequestSender` takes the receiver's partial result then, not a failure.
struct DecisionReached: Error {}
