-- Counting semaphore: take a client whose last waiter gave up (its ctx
-- ended, its client closed) off the registry of waiting clients (see
-- sem_common.lua), so that no release designates it meanwhile.
-- KEYS: registry. ARGV: the client's designation.
-- Reply: 1 when it was registered, 0 otherwise.
return redis.call('ZREM', KEYS[1], ARGV[1])
