package base

// Count-down latch names (package latch). The channel is Redisson's,
// byte for byte: its braces are added whatever the name holds (Redisson
// does not use prefixName here), so for a name with a hash tag of its own
// the channel hashes to another slot than the latch.
const (
	LatchChannelPrefix = "redisson_countdownlatch__channel__"
	// LatchOpsPrefix is rlock's own: the latch's operation log, which
	// makes every write exactly-once under re-sends.
	LatchOpsPrefix = "rlock_latch_ops"
)

// LatchChannel returns the channel of count-down latch name.
func LatchChannel(name string) string { return LatchChannelPrefix + "{" + name + "}" }

// LatchOps returns the operation log of count-down latch name, in its
// hash slot.
func LatchOps(name string) string { return DerivedKey(LatchOpsPrefix, name) }
