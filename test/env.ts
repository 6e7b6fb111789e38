// Loaded before anything reads shared/config: the in-process test suite is one client address creating hundreds of
// accounts a minute, so it raises its own sign-in limit. The limit itself is tested against a worker that keeps a low one.
process.env.AUTH_RATE_LIMIT ??= '1000000'
